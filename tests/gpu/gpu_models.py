"""The GPU suite's model repository: small python models, each on a KIND_GPU instance.

numpy_gpu     OUT = 2 * IN with numpy only; also returns the instance's kind and device id
torch_cuda    OUT = 2 * IN + 1 computed by torch on the instance's GPU, returned as numpy
torch_dlpack  the same, returned with Tensor.from_dlpack of the CUDA tensor (zero copy)
cupy_dlpack   OUT = 3 * IN computed by cupy, returned with Tensor.from_dlpack of the array
The dlpack models also return what the output Tensor says of itself (is_cpu,
__dlpack_device__), so a test sees where pybackend placed it.
"""

from __future__ import annotations

from pathlib import Path

from gpu_io_models import torch_model, write_io_models
from gpu_qa_io_models import QA_IO_MODELS

_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "IN", data_type: TYPE_FP32, dims: [ -1 ] }} ]
output [
  {{ name: "OUT", data_type: TYPE_FP32, dims: [ -1 ] }}{extra_outputs}
]
instance_group [ {{ kind: KIND_GPU, count: 1 }} ]
"""

_PLACEMENT_OUTPUTS = """,
  { name: "IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] },
  { name: "DLPACK_DEVICE", data_type: TYPE_INT32, dims: [ 2 ] }"""

_INSTANCE_OUTPUTS = """,
  { name: "KIND", data_type: TYPE_STRING, dims: [ 1 ] },
  { name: "DEVICE_ID", data_type: TYPE_INT32, dims: [ 1 ] }"""

_NUMPY_GPU = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.kind = args["model_instance_kind"]
        self.device_id = int(args["model_instance_device_id"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", (x * 2).astype(np.float32)),
                pb_utils.Tensor("KIND", np.array([self.kind.encode()], dtype=np.object_)),
                pb_utils.Tensor("DEVICE_ID", np.array([self.device_id], dtype=np.int32)),
            ]))
        return responses
"""

# The placement outputs describe the Tensor the model returns as OUT.
_NO_EXTRA = """
def extra_outputs(tensor):
    return []
"""

_PLACEMENT = """
def extra_outputs(tensor):
    device = tensor.__dlpack_device__()
    return [
        pb_utils.Tensor("IS_CPU", np.array([tensor.is_cpu()], dtype=np.bool_)),
        pb_utils.Tensor("DLPACK_DEVICE", np.array([int(d) for d in device], dtype=np.int32)),
    ]
"""


def _torch(extra: str, make_out: str) -> str:
    """OUT = 2 * IN + 1 computed by torch on the GPU; ``make_out`` makes the Tensor from y."""
    return torch_model(
        header="import numpy as np\n" + extra,
        body=f"""
x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
# A copy: the input is read-only, which torch would warn about.
y = torch.as_tensor(x.copy(), device=self.device) * 2 + 1
assert y.is_cuda, y.device
out = {make_out}
responses.append(pb_utils.InferenceResponse([out, *extra_outputs(out)]))
""",
    )


_CUPY_DLPACK = """
import cupy as cp
import numpy as np
import triton_python_backend_utils as pb_utils
{extra}

class TritonPythonModel:
    def initialize(self, args):
        self.device = cp.cuda.Device(int(args["model_instance_device_id"]))

    def execute(self, requests):
        responses = []
        with self.device:
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                out = pb_utils.Tensor.from_dlpack("OUT", cp.asarray(x) * 3)
                responses.append(pb_utils.InferenceResponse([out, *extra_outputs(out)]))
        return responses
"""

#: name -> (model.py, extra outputs in config.pbtxt)
MODELS = {
    "numpy_gpu": (_NUMPY_GPU, _INSTANCE_OUTPUTS),
    "torch_cuda": (
        _torch(_NO_EXTRA, 'pb_utils.Tensor("OUT", y.cpu().numpy())'),
        "",
    ),
    "torch_dlpack": (
        _torch(_PLACEMENT, 'pb_utils.Tensor.from_dlpack("OUT", torch.utils.dlpack.to_dlpack(y))'),
        _PLACEMENT_OUTPUTS,
    ),
    "cupy_dlpack": (_CUPY_DLPACK.format(extra=_PLACEMENT), _PLACEMENT_OUTPUTS),
}


def write_repository(root: Path) -> Path:
    """Writes every model of MODELS, gpu_io_models.MODELS and gpu_qa_io_models.QA_IO_MODELS
    under ``root``; returns it."""
    for name, (source, extra_outputs) in MODELS.items():
        version = root / name / "1"
        version.mkdir(parents=True)
        config = _CONFIG.format(name=name, extra_outputs=extra_outputs)
        (root / name / "config.pbtxt").write_text(config)
        (version / "model.py").write_text(source)
    write_io_models(root)
    write_io_models(root, QA_IO_MODELS)
    return root
