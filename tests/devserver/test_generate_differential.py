"""The generate extension (``/generate``, ``/generate_stream``) of the development server
against tritonserver 2.51 with our backend: the same statuses and bodies (the events of a
stream byte for byte), for the examples and for models that show how the flat JSON values
are shaped by the config's dims and which keys become parameters."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest
from http_exchange import exchange

from pybackend.devserver import DevServer
from pybackend.server import TritonServer

REPORT = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            shape = np.array([x.shape], dtype=np.int64)
            params = np.array([[r.parameters().encode()]], dtype=object)
            if not self.batching:
                shape, params = shape[0], params[0]
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("SHAPE", shape), pb_utils.Tensor("PARAMS", params),
            ]))
        return out

    def initialize(self, args):
        import json
        self.batching = json.loads(args["model_config"])["max_batch_size"] > 0
"""

DIMS = {"d1": "-1, 2", "d2": "-1, -1", "d3": "2, -1", "d4": "1", "d5": "-1", "b1": "-1"}


@pytest.fixture(scope="module")
def shape_servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[str, str]]:
    """(tritonserver's, the development server's) HTTP address, on models that report the
    shape of their input X and the parameters of their request."""
    repo = tmp_path_factory.mktemp("generate")
    for name, dims in DIMS.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(REPORT)
        (repo / name / "config.pbtxt").write_text(
            f'backend: "python"\nmax_batch_size: {4 if name.startswith("b") else 0}\n'
            f'input [ {{ name: "X" data_type: TYPE_FP32 dims: [ {dims} ] }} ]\n'
            'output [ { name: "SHAPE" data_type: TYPE_INT64 dims: [ -1 ] },\n'
            '         { name: "PARAMS" data_type: TYPE_STRING dims: [ 1 ] } ]\n'
        )
    with TritonServer(repo) as real, DevServer(Path(repo), echo_logs=False) as dev:
        yield real.http_url, dev.http_url


def _post(url: str, path: str, body: Any) -> Tuple[int, Any]:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return exchange(url, "POST", path, data, {"Content-Type": "application/json"})


SHAPE_CASES: Dict[str, Tuple[str, Any]] = {
    f"{name} X={json.dumps(x)}": (name, {"X": x})
    for name in DIMS
    for x in ([1, 2], [1, 2, 3, 4], 1, [1], [[1, 2], [3, 4]])
}
PARAMETER_CASES: Dict[str, Tuple[str, Any]] = {
    f"parameter {json.dumps(extra)}": ("d5", {"X": [1], **extra})
    for extra in (
        {"temperature": 0.5},
        {"n": 3, "s": "str", "b": True},
        {"parameters": {"x": 1, "y": "z"}},
        {"id": "q-1"},
        {"big": 2**40, "neg": -2},
        {"lst": [1, 2]},
        {"obj": {"a": 1}},
    )
}


@pytest.mark.parametrize("case", list(SHAPE_CASES) + list(PARAMETER_CASES))
def test_values_are_shaped_and_parameters_passed_as_by_tritonserver(
    case: str, shape_servers: Tuple[str, str]
) -> None:
    model, body = {**SHAPE_CASES, **PARAMETER_CASES}[case]
    real, dev = shape_servers
    for path in (f"/v2/models/{model}/generate", f"/v2/models/{model}/generate_stream"):
        assert _post(dev, path, body) == _post(real, path, body)


ADD_SUB = {"INPUT0": [1, 2, 3, 4], "INPUT1": [0.5, 1, 1, 1]}
EXAMPLE_CASES: Dict[str, Tuple[str, Any]] = {
    "add_sub": ("add_sub/generate", ADD_SUB),
    "add_sub streamed": ("add_sub/generate_stream", ADD_SUB),
    "add_sub with an id": ("add_sub/generate", {**ADD_SUB, "id": "r-7"}),
    "a missing input": ("add_sub/generate", {"INPUT0": [1, 2, 3, 4]}),
    "a missing input, streamed": ("add_sub/generate_stream", {"INPUT0": [1, 2, 3, 4]}),
    "BYTES in a batching model": ("string_echo/generate", {"INPUT0": ["x", "yé"]}),
    "one BYTES value": ("string_echo/generate", {"INPUT0": "x"}),
    "token stream": ("token_stream/generate_stream", {"PROMPT": "a b c"}),
    "token stream, two tokens": (
        "token_stream/generate_stream",
        {"PROMPT": "a b c", "MAX_TOKENS": 2},
    ),
    "one token through generate": ("token_stream/generate", {"PROMPT": "a b c", "MAX_TOKENS": 1}),
    "execute raises": ("error_model/generate", {"INPUT0": [1.0, 2.0]}),
    "execute raises, streamed": ("error_model/generate_stream", {"INPUT0": [1.0, 2.0]}),
    "an unknown model": ("nope/generate", ADD_SUB),
    "a BLS pipeline": ("bls_pipeline/generate", {"INPUT0": [1, 2, 3, 4]}),
}


@pytest.mark.parametrize("case", list(EXAMPLE_CASES))
def test_the_examples_answer_as_under_tritonserver(
    case: str, devserver: Any, examples_server: Any
) -> None:
    path, body = EXAMPLE_CASES[case]
    want = _post(examples_server.http_url, f"/v2/models/{path}", body)
    assert _post(devserver.http_url, f"/v2/models/{path}", body) == want


def test_generate_of_a_stream_says_what_tritonserver_says(
    devserver: Any, examples_server: Any
) -> None:
    """Three tokens through /generate: the same text; tritonserver sends it with status 200,
    which a client cannot tell from an answer, so ours says 400."""
    body = {"PROMPT": "a b c"}
    real = _post(examples_server.http_url, "/v2/models/token_stream/generate", body)
    dev = _post(devserver.http_url, "/v2/models/token_stream/generate", body)
    assert dev == (400, real[1])
    assert "generate expects model to produce exactly 1 response" in dev[1]["error"]
