"""What the GPU machine offers, recorded in the JUnit report, and checked: torch and cupy
compute on the device, and CUDA IPC works between two processes (the backend and the stub
will share device memory that way). The probes are scripts/gpu_env_probe.py's, which the GPU
check also prints into env.txt."""

from __future__ import annotations

import runpy
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest

pytestmark = pytest.mark.gpu

PROBE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_env_probe.py"


@pytest.fixture(scope="module")
def probe() -> SimpleNamespace:
    """The probe script's functions (run as a module without its __main__ part)."""
    return SimpleNamespace(**runpy.run_path(str(PROBE_SCRIPT), run_name="gpu_env_probe"))


def test_torch_computes_on_the_gpu(
    probe: SimpleNamespace, record_property: Callable[[str, object], None]
) -> None:
    import torch

    record_property("driver", probe.driver())
    record_property("torch", probe.torch_info())
    a = torch.arange(64 * 64, dtype=torch.float32).reshape(64, 64) / 1000
    on_gpu = (a.cuda() @ a.cuda()).cpu()
    assert torch.cuda.device_count() >= 1
    np.testing.assert_allclose(on_gpu.numpy(), (a @ a).numpy(), rtol=1e-4)


def test_cupy_computes_on_the_gpu(
    probe: SimpleNamespace, record_property: Callable[[str, object], None]
) -> None:
    cp = pytest.importorskip("cupy", reason="cupy is not installed on this GPU machine")
    record_property("cupy", probe.cupy_info())
    assert float(cp.arange(1000, dtype=cp.float64).sum()) == 499500.0


def test_cuda_ipc_between_processes(
    probe: SimpleNamespace, record_property: Callable[[str, object], None]
) -> None:
    pytest.importorskip("cupy", reason="the IPC probe allocates with cupy")
    worked, description = probe.cuda_ipc()
    record_property("cuda_ipc", description)
    assert worked, description
