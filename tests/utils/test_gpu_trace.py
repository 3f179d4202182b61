"""The stub's GPU stage timers (pybackend/utils/gpu_trace.py): off unless PYBACKEND_GPU_TRACE
names a file, then one ``pbtrace stub <stage> <ns>`` line per record, appended. Read in a
fresh interpreter: the switch is a module constant read once at import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
from pybackend.utils import gpu_trace
print(gpu_trace.ON)
t0 = gpu_trace.now()
if gpu_trace.ON:
    gpu_trace.record("map.open", t0)
    gpu_trace.count("map.hit")
"""


def run(env_value: str | None) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYBACKEND_GPU_TRACE"}
    if env_value is not None:
        env["PYBACKEND_GPU_TRACE"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip()


def test_off_by_default_and_when_empty(tmp_path: Path) -> None:
    assert run(None) == "False"
    assert run("") == "False"


def test_records_one_line_per_stage_appended(tmp_path: Path) -> None:
    trace = tmp_path / "trace.txt"
    trace.write_text("pbtrace backend exec.encode 5\n")  # the backend's lines stay
    assert run(str(trace)) == "True"
    lines = [line.split(" ") for line in trace.read_text().splitlines()]
    assert lines[0] == ["pbtrace", "backend", "exec.encode", "5"]
    assert [line[:3] for line in lines[1:]] == [
        ["pbtrace", "stub", "map.open"],
        ["pbtrace", "stub", "map.hit"],
    ]
    assert int(lines[1][3]) >= 0 and lines[2][3] == "0"


def test_an_unwritable_file_never_fails_the_caller(tmp_path: Path) -> None:
    assert run(str(tmp_path / "missing-dir" / "trace.txt")) == "True"


DLPACK_SCRIPT = """
import numpy as np
from pybackend.utils import dtypes, tensor
from pybackend.utils.dlpack import DeviceBuffer

host = np.zeros(16, np.float32)
buf = DeviceBuffer(host.ctypes.data, 64, 2, 0)
t = tensor.Tensor._on_device("IN", dtypes.TYPE_FP32, (16,), buf)
capsule = t.__dlpack__(stream=7)
out = tensor._from_gpu_capsule(tensor.Tensor, "OUT", capsule, True)
print(out.shape(), out.is_cpu())
"""


def test_the_dlpack_stages_inside_a_models_execute(tmp_path: Path) -> None:
    """Our export of a GPU tensor (what torch.from_dlpack calls) and the consumption of a
    producer's capsule are timed apart from the model's own work (docs/gpu.md)."""
    trace = tmp_path / "trace.txt"
    env = {**os.environ, "PYBACKEND_GPU_TRACE": str(trace)}
    out = subprocess.run(
        [sys.executable, "-c", DLPACK_SCRIPT], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["[16]", "False"]
    stages = [line.split(" ")[2] for line in trace.read_text().splitlines()]
    assert stages == ["to_dlpack", "from_dlpack.take"]
