"""The GPU suite (marker `gpu`): the real tritonserver with our backend on an NVIDIA GPU.

Everything here is skipped, with the reason, where there is no CUDA driver, no torch or no
device torch can use (CI and the development machines). scripts/gpu_check.sh runs it on the
GPU machine (docs/gpu.md). One server serves the whole suite; it starts with
--exit-on-error=false and --strict-readiness=false so that a model failing to load fails
its own tests, not the whole run. PYBACKEND_GPU_SERVER_LOG names a file the server's log is
appended to when it stops (the GPU check brings it back).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

import pytest
from gpu_models import write_repository
from gpu_support import CudaRegion, cuda_regions_of, serve

if TYPE_CHECKING:
    from pybackend.server import TritonServer

GPU_DIR = Path(__file__).resolve().parent
LAST_FILE = "test_gpu_lifetimes.py"


@functools.lru_cache(maxsize=None)
def gpu_unavailable_reason() -> str | None:
    """Why the GPU suite cannot run here, or None when it can."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no CUDA driver (libcuda.so.1 cannot be loaded): tests/gpu need an NVIDIA GPU"
    try:
        torch = _import_quietly("torch")
    except ImportError:
        return "torch is not installed: tests/gpu use torch to drive and check the GPU"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA device"
    try:
        _import_quietly("cupy")  # optional: its tests skip by themselves without it
    except ImportError:
        pass
    return None


def _import_quietly(name: str) -> ModuleType:
    """Import-time warnings of the machine's own torch or cupy are not ours to fix, and under
    filterwarnings=error they would hide every GPU result; later imports hit the cache."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return importlib.import_module(name)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip this directory's tests (before any fixture starts a server) where no GPU is.
    Run the tests that kill stubs and measure the whole device last: a failure there must
    not take the shared server's other results with it."""
    items.sort(key=lambda item: Path(str(item.path)).name == LAST_FILE)  # stable
    mine = [item for item in items if GPU_DIR in Path(str(item.path)).parents]
    reason = gpu_unavailable_reason() if mine else None
    if reason is None:
        return
    for item in mine:
        item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def gpu_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    """One tritonserver with our backend on the repository of gpu_models.py."""
    with serve(write_repository(tmp_path_factory.mktemp("gpu_models"))) as server:
        yield server


@pytest.fixture
def grpc(gpu_server: TritonServer) -> Iterator[Any]:
    """A gRPC client of the GPU server (the GPU machine has no HTTP client stack)."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url=gpu_server.grpc_url)
    yield client
    client.close()


@pytest.fixture
def cuda_regions(grpc: Any) -> Iterator[Callable[[int], CudaRegion]]:
    """make(nbytes): a CUDA shared-memory region of this process registered with the GPU
    server; every region made is unregistered and freed after the test."""
    with cuda_regions_of(grpc, "gpu-test") as make:
        yield make
