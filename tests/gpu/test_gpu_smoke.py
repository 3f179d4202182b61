"""Smoke tests through the real tritonserver on a GPU: KIND_GPU instances of our backend serve
requests, a torch model computes on cuda inside the stub, and GPU tensors leave a model
through Tensor.from_dlpack (torch and cupy) with the values and placement they should have.
The models are in gpu_models.py."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from gpu_support import KDL_CUDA, infer

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu

#: 16 elements travel inline; 1 Mi elements (4 MiB) take the large-tensor path.
SIZES = [16, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
def test_numpy_model_on_a_gpu_instance(grpc: Any, gpu_server: TritonServer, size: int) -> None:
    x = np.arange(size, dtype=np.float32)
    got = infer(grpc, gpu_server, "numpy_gpu", {"IN": x}, ["OUT", "KIND", "DEVICE_ID"])
    np.testing.assert_array_equal(got["OUT"], x * 2)
    assert got["KIND"].tolist() == [b"GPU"]
    assert got["DEVICE_ID"].tolist() == [0]


@pytest.mark.parametrize("size", SIZES)
def test_torch_on_cuda_returning_numpy(grpc: Any, gpu_server: TritonServer, size: int) -> None:
    x = np.linspace(-1, 1, size, dtype=np.float32)
    got = infer(grpc, gpu_server, "torch_cuda", {"IN": x}, ["OUT"])
    np.testing.assert_allclose(got["OUT"], x * 2 + 1, rtol=1e-6)


@pytest.mark.parametrize("size", SIZES)
def test_torch_cuda_tensor_from_dlpack(grpc: Any, gpu_server: TritonServer, size: int) -> None:
    """The common GPU model.py: Tensor.from_dlpack of torch's CUDA result, no .cpu()."""
    x = np.linspace(-1, 1, size, dtype=np.float32)
    got = infer(grpc, gpu_server, "torch_dlpack", {"IN": x}, ["OUT", "IS_CPU", "DLPACK_DEVICE"])
    np.testing.assert_allclose(got["OUT"], x * 2 + 1, rtol=1e-6)
    assert got["IS_CPU"].tolist() == [False]
    assert got["DLPACK_DEVICE"].tolist() == [KDL_CUDA, 0]


@pytest.mark.parametrize("size", SIZES)
def test_cupy_array_from_dlpack(grpc: Any, gpu_server: TritonServer, size: int) -> None:
    pytest.importorskip("cupy", reason="cupy is not installed on this GPU machine")
    x = np.linspace(-1, 1, size, dtype=np.float32)
    got = infer(grpc, gpu_server, "cupy_dlpack", {"IN": x}, ["OUT", "IS_CPU", "DLPACK_DEVICE"])
    np.testing.assert_allclose(got["OUT"], x * 3, rtol=1e-6)
    assert got["IS_CPU"].tolist() == [False]
    assert got["DLPACK_DEVICE"].tolist() == [KDL_CUDA, 0]


def test_server_still_serves_after_the_gpu_models(grpc: Any, gpu_server: TritonServer) -> None:
    """Whatever the GPU models did (or failed to do), the server and a plain model still work."""
    x = np.ones(8, dtype=np.float32)
    np.testing.assert_array_equal(
        infer(grpc, gpu_server, "numpy_gpu", {"IN": x}, ["OUT"])["OUT"], x * 2
    )
    assert gpu_server.is_alive()
