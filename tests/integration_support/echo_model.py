"""A one-model repository for backend-level tests through the real server: "echo" takes an
FP32 vector X of any length and returns Y = 2 * X (a new array: the output is placed like
any computed result, inline, in the stub's arena or through a new segment by size)."""

from __future__ import annotations

from pathlib import Path

CONFIG = """
name: "echo"
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU, count: %d } ]
"""

MODEL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * 2)]))
        return out
"""


def write_echo_repository(root: Path, instances: int = 1) -> Path:
    """Writes the "echo" model under ``root`` (the model repository) and returns ``root``."""
    version = root / "echo" / "1"
    version.mkdir(parents=True)
    (root / "echo" / "config.pbtxt").write_text(CONFIG % instances)
    (version / "model.py").write_text(MODEL)
    return root
