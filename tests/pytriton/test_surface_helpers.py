"""The PyTriton helpers that need no server, with PyTriton 0.7's results and texts (each
observed side by side with NVIDIA's): ``ModelConfigParser``, ``generate_warmup_data`` /
``generate_warmup_requests``, ``client.auth``, ``constants.PYTRITON_HOME``, and
``import pybackend.pytriton`` reaching ``.triton``/``.client``/``.model_config`` as
``import pytriton`` does."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from pybackend.pytriton.client.auth import create_auth_headers, extract_access_token_from_headers
from pybackend.pytriton.exceptions import PyTritonBadParameterError, PyTritonModelConfigError
from pybackend.pytriton.model_config.common import (
    DeviceKind,
    DynamicBatcher,
    ModelWarmup,
    QueuePolicy,
    TimeoutAction,
    WarmupInput,
    generate_warmup_data,
    generate_warmup_requests,
)
from pybackend.pytriton.model_config.parser import ModelConfigParser
from pybackend.pytriton.model_config.triton_model_config import ResponseCache, TensorSpec

PBTXT = """
name: "m"
max_batch_size: 4
input [ { name: "x" data_type: TYPE_FP32 dims: [ 2 ] optional: true } ]
output [ { name: "y" data_type: TYPE_STRING dims: [ -1 ] } ]
instance_group [ { count: 2 kind: KIND_CPU } ]
dynamic_batching {
  max_queue_delay_microseconds: 50
  default_queue_policy { timeout_action: DELAY max_queue_size: 3 }
  priority_levels: 2
  priority_queue_policy { key: 1 value { allow_timeout_override: true } }
}
parameters { key: "k" value { string_value: "v" } }
response_cache { enable: true }
model_transaction_policy { decoupled: true }
model_warmup [ {
  name: "w" batch_size: 2 count: 3
  inputs { key: "x" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } }
} ]
"""


def test_parser_reads_a_config_pbtxt(tmp_path: Path) -> None:
    path = tmp_path / "config.pbtxt"
    path.write_text(PBTXT)
    c = ModelConfigParser.from_file(config_path=path)
    assert (c.model_name, c.max_batch_size, c.batching, c.decoupled) == ("m", 4, True, True)
    assert c.inputs == [TensorSpec("x", (2,), np.float32, True)]
    assert c.outputs == [TensorSpec("y", (-1,), np.bytes_, False)]
    assert c.instance_group == {DeviceKind.KIND_CPU: 2}
    assert c.backend_parameters == {"k": "v"}
    assert c.response_cache == ResponseCache(enable=True)
    assert c.batcher == DynamicBatcher(
        max_queue_delay_microseconds=50,
        priority_levels=2,
        default_queue_policy=QueuePolicy(timeout_action=TimeoutAction.DELAY, max_queue_size=3),
        priority_queue_policy={1: QueuePolicy(allow_timeout_override=True)},
    )
    assert c.model_warmup == [
        ModelWarmup("w", 2, {"x": WarmupInput(np.float32, (2,), zero_data=True)}, 3)
    ]


@pytest.mark.parametrize(
    "tensor, text",
    [
        ({"dims": [1]}, "Name for input at index 0 not provided."),
        ({"name": "a", "dims": [1]}, "Data type for input with name `a` not defined."),
        (
            {"name": "a", "data_type": "FP32", "dims": [1]},
            "Invalid data type `FP32` for input with name `a` not defined. "
            "The expected name is TYPE_{type}.",
        ),
        (
            {"name": "a", "data_type": "TYPE_FOO", "dims": [1]},
            "Unsupported data type `TYPE_FOO` for input with name `a`",
        ),
        ({"name": "a", "data_type": "TYPE_FP32"}, "Dimension for input with name `a` not defined."),
    ],
)
def test_parser_errors(tensor: dict, text: str) -> None:
    with pytest.raises(PyTritonModelConfigError) as raised:
        ModelConfigParser.from_dict({"name": "m", "input": [tensor]})
    assert raised.value.message == text


def test_parser_without_tensors_gives_none() -> None:
    c = ModelConfigParser.from_dict({"name": "m"})
    assert (c.inputs, c.outputs, c.batching, c.batcher) == (None, None, False, None)


def test_generate_warmup_data(tmp_path: Path) -> None:
    zeros = generate_warmup_data(WarmupInput(np.int32, (3,), zero_data=True), 2)
    assert zeros.dtype == np.int32 and zeros.shape == (2, 3) and not zeros.any()
    for dtype in (np.int8, np.uint16, np.int64, np.float16, np.bool_, np.bytes_):
        data = generate_warmup_data(WarmupInput(dtype, [2, 1], random_data=True), 3)
        assert data.shape == (3, 2, 1) and data.dtype.type is dtype
    words = generate_warmup_data(WarmupInput(np.bytes_, (4,), random_data=True), 1)
    assert all(8 <= len(w) <= 32 and w.isalnum() for w in words.ravel())

    sample = tmp_path / "sample.npy"
    np.save(sample, np.array([1.5, 2.5]))
    data = generate_warmup_data(WarmupInput(np.float32, (2,), input_data_file=str(sample)), 3)
    assert data.dtype == np.float32 and data.tolist() == [[1.5, 2.5]] * 3
    batch = tmp_path / "batch.npy"
    np.save(batch, np.array([[1], [2]]))
    data = generate_warmup_data(WarmupInput(np.int64, (1,), input_data_file=str(batch)), 3)
    assert data.tolist() == [[1], [2], [1]]  # tiled, then cut to the batch size
    with pytest.raises(PyTritonBadParameterError) as raised:
        generate_warmup_data(WarmupInput(np.int64, (5,), input_data_file=str(batch)), 3)
    assert raised.value.message == (
        "Input data file shape (2, 1) doesn't match expected shape (3, 5)"
    )
    with pytest.raises(PyTritonBadParameterError, match="must be provided for warmup input"):
        generate_warmup_data(WarmupInput(np.int64, (5,)), 1)


def test_generate_warmup_requests() -> None:
    warmups = [
        ModelWarmup("a", 2, {"x": WarmupInput(np.float32, (1,), zero_data=True)}, 2),
        ModelWarmup("b", 1, {"y": WarmupInput(np.int8, (4,), random_data=True)}, 1),
    ]
    requests = generate_warmup_requests(warmups, [], [])
    assert [{k: v.shape for k, v in r.items()} for r in requests] == [
        {"x": (2, 1)},
        {"x": (2, 1)},
        {"y": (1, 4)},
    ]
    assert generate_warmup_requests([], [], []) == []


def test_auth_headers() -> None:
    assert create_auth_headers("t", "http") == {"triton-access-token": "t"}
    assert create_auth_headers("t", "GRPC") == {"triton-grpc-protocol-triton-access-token": "t"}
    with pytest.raises(ValueError, match="access_token cannot be None or empty"):
        create_auth_headers(None, "http")
    with pytest.raises(ValueError, match="Invalid protocol 'ws'. Must be 'http' or 'grpc'"):
        create_auth_headers("t", "ws")
    assert extract_access_token_from_headers(None) is None
    assert extract_access_token_from_headers({"other": "x"}) is None
    assert (
        extract_access_token_from_headers({"triton-grpc-protocol-triton-access-token": "g"}) == "g"
    )
    both = {"triton-access-token": "a", "triton-grpc-protocol-triton-access-token": "b"}
    with pytest.raises(ValueError, match="Conflicting authentication headers"):
        extract_access_token_from_headers(both)


def _python(code: str, **env: str) -> str:
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    return run.stdout.strip()


def test_pytriton_home(tmp_path: Path) -> None:
    code = "from pybackend.pytriton.constants import PYTRITON_HOME; print(PYTRITON_HOME)"
    assert _python(code, PYTRITON_HOME=str(tmp_path / "h")) == str(tmp_path / "h")
    env = {k: v for k, v in os.environ.items() if k != "PYTRITON_HOME"}
    run = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "XDG_CACHE_HOME": str(tmp_path / "c")},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.stdout.strip() == str(tmp_path / "c" / "pytriton"), run.stderr


def test_package_attributes_import_on_use() -> None:
    # As `import pytriton; pytriton.triton.Triton`; a client-only import pulls in no server.
    out = _python(
        "import sys, pybackend.pytriton as p, pybackend.pytriton.client\n"
        "print('pybackend.pytriton._triton' in sys.modules)\n"
        "print(p.triton.Triton.__name__, p.client.ModelClient.__name__, end=' ')\n"
        "print(p.model_config.Tensor.__name__)\n"
        "try:\n    p.nope\nexcept AttributeError as e:\n    print(e)"
    )
    assert out.splitlines() == [
        "False",
        "Triton ModelClient Tensor",
        "module 'pybackend.pytriton' has no attribute 'nope'",
    ]
