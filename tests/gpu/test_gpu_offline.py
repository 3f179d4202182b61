"""The offline engines with a model whose outputs are on a GPU (docs/testing.md): the
in-process harness copies a GPU output to the host itself; a real stub process sends it by
CUDA IPC and the harness maps and copies it, as the backend does when Triton hands out host
memory. Both paths exist only for a GPU, so they run here and nowhere else.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

CONFIG = """
name: "offline_gpu"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""

# Tensor.from_dlpack of the producer itself (its __dlpack__), not of torch.utils.dlpack's
# capsule: the in-process harness runs the model in the test process, where a deprecation
# warning of the machine's torch would be an error.
MODEL = """
import json

import cupy
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            if json.loads(request.parameters()).get("producer") == "cupy":
                y = cupy.asarray(x) * 3
            else:
                y = torch.from_numpy(x).cuda() * 3
            out = pb_utils.Tensor.from_dlpack("Y", y)
            assert not out.is_cpu(), "the output should stay on the GPU until the engine copies it"
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    pytest.importorskip("cupy", reason="the model also returns cupy arrays")
    root = tmp_path / "offline_gpu"
    (root / "1").mkdir(parents=True)
    (root / "config.pbtxt").write_text(CONFIG)
    (root / "1" / "model.py").write_text(MODEL)
    return root


@pytest.mark.parametrize("producer", ["torch", "cupy"])
@pytest.mark.parametrize("engine", ["ModelHarness", "StubModel"])
def test_a_gpu_output_reaches_the_test_as_host_data(
    model_dir: Path, engine: str, producer: str
) -> None:
    import pybackend.testing as testing

    x = np.linspace(-2, 2, 1 << 18, dtype=np.float32)  # 1 MiB: the large-tensor path
    with getattr(testing, engine)(model_dir) as model:
        for _ in range(3):  # the stub's mapping is reused, and its holds come back
            got = model.infer({"X": x}, parameters={"producer": producer})["Y"]
            assert isinstance(got, np.ndarray), type(got)
            np.testing.assert_allclose(got, x * 3, rtol=1e-6)
