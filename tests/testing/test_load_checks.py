"""What tritonserver does at load besides calling the backend, in every engine: it runs the
``model_warmup`` samples on the instance (a failing one fails the load; the requests count in
the statistics), and it refuses configurations the offline engines used to accept. Each test
runs in-process, in a stub process and through tritonserver (the texts are the server's)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, Optional

import numpy as np
import pytest

from pybackend.testing import InferError, OutputMismatchWarning, ServerModel

ENGINES = pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])

#: Reports every batch it executed (the warmup's among them) on a request with REPORT set.
RECORDER = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.seen = []

    def execute(self, requests):
        batch = []
        for r in requests:
            s = pb_utils.get_input_tensor_by_name(r, "S").as_numpy()
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            random = s.flat[0] == b"random"
            batch.append({
                "id": r.request_id(),
                "requested": sorted(r.requested_output_names()),
                "X": [x.dtype.str, list(x.shape)] + ([] if random else [x.tolist()]),
                "S": [s.dtype.str, list(s.shape), [bytes(v).decode() for v in s.flat]],
            })
            if s.flat[0] == b"fail":
                raise ValueError("warmup refused")
        self.seen.append(batch)
        report = np.array([json.dumps(self.seen).encode()], np.object_)
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy()),
                pb_utils.Tensor("SEEN", report.reshape(1, 1)),
            ])
            for r in requests
        ]
"""

CONFIG = """backend: "python"
max_batch_size: 4
input [ { name: "X" data_type: TYPE_INT32 dims: [ 2 ] },
        { name: "S" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_INT32 dims: [ 2 ] },
         { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] } ]
model_warmup [
  { name: "zeros" batch_size: 3 count: 2
    inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 1 ] zero_data: true } } },
  { name: "files" batch_size: 2
    inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 2 ] input_data_file: "x.bin" } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "s.bin" } } },
  { name: "no_batch_size_runs_nothing"
    inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 2 ] zero_data: true } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 1 ] zero_data: true } } },
  { name: "random" batch_size: 1
    inputs { key: "X" value: { data_type: TYPE_INT32 dims: [ 2 ] random_data: true } }
    inputs { key: "S" value: { data_type: TYPE_STRING dims: [ 1 ] input_data_file: "r.bin" } } }
]
"""


def _model(
    root: Path, name: str, body: str, config: str, files: Optional[Dict[str, bytes]] = None
) -> Path:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(body)
    (root / name / "config.pbtxt").write_text(config)
    if files:
        (root / name / "warmup").mkdir()
        for file, data in files.items():
            (root / name / "warmup" / file).write_bytes(data)
    return root / name


def _warmup_files(text: bytes) -> Dict[str, bytes]:
    return {
        "x.bin": np.array([1, 2], np.int32).tobytes(),
        "s.bin": len(text).to_bytes(4, "little") + text,
        "r.bin": b"\x06\x00\x00\x00random",
    }


def _statistics(model: Any, inferences: int = 0) -> Dict[str, Any]:
    """The model's statistics; through the server, once they count ``inferences`` requests:
    tritonserver's statistics follow a response (the backend reports a batch after sending
    its responses), so a read right after the response may miss that batch."""
    if isinstance(model, ServerModel):
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(model.server.http_url)
        try:
            deadline = time.monotonic() + 10
            while True:
                stats = dict(client.get_inference_statistics(model.model_name)["model_stats"][0])
                if int(stats["inference_count"]) >= inferences or time.monotonic() > deadline:
                    return stats
                time.sleep(0.02)
        finally:
            client.close()
    return model.statistics.snapshot()


def _request() -> Dict[str, np.ndarray]:
    return {"X": np.array([[5, 6]], np.int32), "S": np.array([[b"client"]], np.object_)}


def _load_failure(triton_model: Any, path: Path) -> str:
    """The error of a load that must fail, as text.

    tritonserver 2.51 itself sometimes dies of SIGSEGV while it fails a warmup at start-up,
    before it logs why: 3 of 8 starts here, with NVIDIA's original backend as with ours
    (docs/compatibility.md). Such a start tells nothing about the backend, so the server
    engine tries again; the load must still fail, and the caller checks the server's text.
    """
    for _attempt in range(6):
        with pytest.raises(Exception) as info:
            triton_model(path)
        if "exited (signal SIGSEGV)" not in str(info.value):
            break
    return str(info.value)


@ENGINES
def test_warmup_samples_run_at_load(triton_model: Any, tmp_path: Path) -> None:
    """Each sample's ``count`` executes of ``batch_size`` requests (batch dimension 1), in
    config order, before the first client's: zero data, files (BYTES length-prefixed) and
    random data, every output requested; all in the statistics. A sample without
    ``batch_size`` makes no request."""
    model = triton_model(_model(tmp_path, "warm", RECORDER, CONFIG, _warmup_files(b"hi")))
    seen = json.loads(model.infer(_request())["SEEN"].flat[0])
    zeros = {"X": ["<i4", [1, 2], [[0, 0]]], "S": ["|O", [1, 1], [""]]}
    files = {"X": ["<i4", [1, 2], [[1, 2]]], "S": ["|O", [1, 1], ["hi"]]}
    random = {"X": ["<i4", [1, 2]], "S": ["|O", [1, 1], ["random"]]}
    client = {"X": ["<i4", [1, 2], [[5, 6]]], "S": ["|O", [1, 1], ["client"]]}
    both = {"id": "", "requested": ["SEEN", "Y"]}
    assert seen == [
        [dict(both, **zeros)] * 3,
        [dict(both, **zeros)] * 3,
        [dict(both, **files)] * 2,
        [dict(both, **random)],
        [dict(both, **client)],
    ]
    stats = _statistics(model, inferences=10)
    assert (stats["inference_count"], stats["execution_count"]) == (10, 5)
    assert stats["inference_stats"]["success"]["count"] == 10


@ENGINES
def test_a_failing_warmup_sample_fails_the_load(triton_model: Any, tmp_path: Path) -> None:
    path = _model(tmp_path, "cold", RECORDER, CONFIG, _warmup_files(b"fail"))
    assert (
        "failed to run warmup sample 'files': Failed to process the request(s) for model "
        "'cold_0', message: ValueError: warmup refused\n\nAt:\n"
    ) in _load_failure(triton_model, path)


IDENTITY = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", r.inputs()[0].as_numpy())])
                for r in requests]
"""
IO = """input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]
"""

REFUSED = {
    "platform": ('platform: "python"\n' + IO, "unexpected platform type 'python' for {name}"),
    "preserve_ordering": (
        'backend: "python"\nmax_batch_size: 4\n'
        + IO
        + "dynamic_batching { preserve_ordering: true priority_levels: 2 "
        "default_priority_level: 1 }\n",
        "Only one priority level is allowed when 'preserve_ordering' is true for {name}",
    ),
    "force_cpu": (
        'backend: "python"\n'
        + IO
        + 'parameters: { key: "FORCE_CPU_ONLY_INPUT_TENSORS" value: { string_value: "maybe" } }\n',
        "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: maybe'",
    ),
    "shape_tensor": (
        'backend: "python"\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] is_shape_tensor: true } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n',
        "shape tensors are only supported for TensorRT platform for {name}",
    ),
    "ensemble_platform": (
        'backend: "python"\nplatform: "ensemble"\n' + IO,
        "Ensemble model '{name}' must have platform type 'ensemble' and empty backend type",
    ),
}


@ENGINES
@pytest.mark.parametrize("case", list(REFUSED))
def test_configurations_the_server_refuses(triton_model: Any, tmp_path: Path, case: str) -> None:
    config, text = REFUSED[case]
    name = f"refused_{case}"
    with pytest.raises(Exception) as info:
        triton_model(_model(tmp_path, name, IDENTITY, config))
    assert text.format(name=name) in str(info.value)


@ENGINES
def test_a_platform_beside_backend_python_loads(triton_model: Any, tmp_path: Path) -> None:
    """The server refuses an unknown platform only where no backend is named: with
    ``backend: "python"`` beside it, the model loads and serves (tritonserver 2.51)."""
    config = 'backend: "python"\nplatform: "python"\n' + IO
    model = triton_model(_model(tmp_path, "both", IDENTITY, config))
    x = np.array([1.5, 2.5], np.float32)
    np.testing.assert_array_equal(model.infer({"X": x})["Y"], x)


@ENGINES
def test_a_tensorflow_platform_names_the_file_a_python_model_runs(
    triton_model: Any, tmp_path: Path
) -> None:
    """tritonserver names the model file by a TensorFlow platform even for backend python
    (default_model_filename "model.savedmodel"): the load looks for that file, not model.py."""
    config = 'backend: "python"\nplatform: "tensorflow_savedmodel"\n' + IO
    path = _model(tmp_path, "tf_named", IDENTITY, config)
    expected = f"Python model file not found in '{path / '1' / 'model.savedmodel'}'"
    assert expected in _load_failure(triton_model, path)


@ENGINES
@pytest.mark.parametrize(
    "backend, platform",
    [("tensorflow", ""), ("pytorch", "onnxruntime_onnx"), ("tensorrt", "pytorch_libtorch")],
)
def test_a_library_backends_runtime_with_another_platform_is_refused(
    triton_model: Any, tmp_path: Path, backend: str, platform: str
) -> None:
    """A python-based backend named after a library backend (NVIDIA's PyTorch Python
    runtime is backends/pytorch/model.py) takes that backend's platform or none, as the
    server's repository poll checks (TensorFlow's must be named)."""
    runtime = tmp_path / "backends" / backend
    runtime.mkdir(parents=True)
    (runtime / "model.py").write_text(IDENTITY)
    config = f'backend: "{backend}"\nplatform: "{platform}"\n' + IO
    path = _model(tmp_path / "models", "paired", IDENTITY, config)
    expected = f"unexpected 'platform' and 'backend' pair, got:{platform}, {backend}"
    with pytest.raises(Exception) as info:
        triton_model(path, runtime=runtime)
    assert expected in str(info.value)


@ENGINES
def test_inputs_to_a_model_that_declares_none(triton_model: Any, tmp_path: Path) -> None:
    """No config.pbtxt and no auto_complete_config: the model has no inputs, and the server
    refuses a request that sends one."""
    (tmp_path / "bare" / "1").mkdir(parents=True)
    (tmp_path / "bare" / "1" / "model.py").write_text(IDENTITY)
    model = triton_model(tmp_path / "bare")
    with pytest.raises(InferError) as info:
        model.infer({"X": np.ones(2, np.float32)})
    assert info.value.message == (
        "[request id: <id_unknown>] expected 0 inputs but got 1 inputs for model 'bare'. "
        "Got input(s) ['X'], but missing required input(s) ]. Please provide all required "
        "input(s)."
    )


@ENGINES
def test_strict_outputs_fail_a_warmup_sample_with_a_mismatch(
    triton_model: Any, tmp_path: Path
) -> None:
    """By default a warmup sample's INT64 output under TYPE_FP32 passes (the model loads);
    under PYBACKEND_STRICT_OUTPUTS it is an error response, so the load fails."""
    body = IDENTITY.replace("r.inputs()[0].as_numpy()", "r.inputs()[0].as_numpy().astype('i8')")
    warmup = (
        'model_warmup [ { name: "zeros" batch_size: 1 inputs { key: "X" value: '
        "{ data_type: TYPE_FP32 dims: [ 2 ] zero_data: true } } } ]\n"
    )
    strict = 'parameters: { key: "PYBACKEND_STRICT_OUTPUTS" value: { string_value: "yes" } }\n'
    config = 'backend: "python"\n' + IO + warmup
    with pytest.warns(OutputMismatchWarning):  # offline, at the warmup too
        lax = triton_model(_model(tmp_path, "lax", body, config))
        assert lax.infer({"X": np.ones(2, np.float32)})["Y"].dtype == np.int64
    strict_path = _model(tmp_path, "strict", body, config + strict)
    assert (
        "failed to run warmup sample 'zeros': output 'Y' of model instance 'strict_0' has data "
        "type TYPE_INT64 but the model configuration declares TYPE_FP32"
    ) in _load_failure(triton_model, strict_path)
