"""Zero copy, shown: through the real tritonserver, every copy the backend makes of a GPU
tensor is counted (pybackend_gpu_copies_total by direction, from the metrics endpoint) and
device pointers are compared inside the stub, for torch and cupy and both values of
FORCE_CPU_ONLY_INPUT_TENSORS. GPU inputs come from the client's CUDA shared memory (cupy
memory registered through tritonclient's gRPC client), GPU outputs go to the client's CUDA
shared memory or to gRPC's CPU buffers. The models are in gpu_models.py and gpu_io_models.py.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pytest
from gpu_io_models import VIEW_OUTPUT_NAMES
from gpu_support import (
    KDL_CPU,
    KDL_CUDA,
    CudaRegion,
    N,
    assert_no_staging,
    assert_pointers,
    copies,
    copies_since,
    infer,
    needs_framework,
    sample,
)

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu

#: What the dlpack models of gpu_models.py compute.
FRESH_OUTPUT = {"torch_dlpack": lambda x: x * 2 + 1, "cupy_dlpack": lambda x: x * 3}


@pytest.mark.parametrize("model", sorted(FRESH_OUTPUT))
def test_a_gpu_output_into_a_cpu_buffer_is_one_device_to_host_copy(
    grpc: Any, gpu_server: TritonServer, model: str
) -> None:
    """gRPC's response buffers are host memory: the backend copies each GPU output once,
    device to host, and nothing else."""
    needs_framework(model)
    x = sample()
    before = copies(gpu_server, model)
    for _ in range(N):
        got = infer(grpc, gpu_server, model, {"IN": x}, ["OUT", "IS_CPU"])
        np.testing.assert_allclose(got["OUT"], FRESH_OUTPUT[model](x), rtol=1e-6)
        assert got["IS_CPU"].tolist() == [False]
    assert copies_since(gpu_server, model, before) == {"d2d": 0, "d2h": N, "h2d": 0}
    assert_no_staging(gpu_server)


@pytest.mark.parametrize("model", sorted(FRESH_OUTPUT))
def test_a_gpu_output_into_cuda_shared_memory_is_one_device_copy(
    grpc: Any, gpu_server: TritonServer, cuda_regions: Callable[[int], CudaRegion], model: str
) -> None:
    """An output the client receives in its CUDA shared memory: Triton's buffer is on the
    GPU, so the stub's tensor goes there device to device, never through the host."""
    needs_framework(model)
    x = sample()
    region = cuda_regions(x.nbytes)
    before = copies(gpu_server, model)
    for i in range(N):
        region.write(np.zeros_like(x))  # what is read back was written by this request
        y = x + i
        got = infer(grpc, gpu_server, model, {"IN": y}, ["OUT"], {"OUT": (region, y.nbytes)})
        np.testing.assert_allclose(got["OUT"], FRESH_OUTPUT[model](y), rtol=1e-6)
    assert copies_since(gpu_server, model, before) == {"d2d": N, "d2h": 0, "h2d": 0}
    assert_no_staging(gpu_server)


@pytest.mark.parametrize("model", ["torch_view_no", "cupy_view_no"])
def test_a_gpu_input_reaches_the_model_on_the_gpu_and_leaves_without_a_host_copy(
    grpc: Any,
    gpu_server: TritonServer,
    cuda_regions: Callable[[int], CudaRegion],
    model: str,
) -> None:
    """FORCE_CPU_ONLY_INPUT_TENSORS "no": the client's CUDA shared memory input arrives as a
    GPU tensor on the instance's device; the model returns a view of it (same pointer, read
    through torch or cupy), and it reaches the client's CUDA output region device to device.
    as_numpy() of the GPU input names the remedy (UV-27)."""
    needs_framework(model)
    x = sample()
    region_in, region_out = cuda_regions(x.nbytes), cuda_regions(x.nbytes)
    before = copies(gpu_server, model)
    for i in range(N):
        y = x - i
        region_out.write(np.zeros_like(y))
        got = infer(
            grpc, gpu_server, model, {"IN": (region_in, y)}, VIEW_OUTPUT_NAMES,
            {"OUT": (region_out, y.nbytes)},
        )  # fmt: skip
        np.testing.assert_array_equal(got["OUT"], y)
        assert got["IN_IS_CPU"].tolist() == [False]
        assert got["OUT_IS_CPU"].tolist() == [False]
        assert got["DEVICE"].tolist() == [KDL_CUDA, 0, 0]  # on device 0, the current one
        assert_pointers(got["PTRS"], view=True)
        error = got["AS_NUMPY_ERROR"][0].decode()
        assert "FORCE_CPU_ONLY_INPUT_TENSORS" in error and "from_dlpack" in error, error
    # No host round trip: two device copies per request. Triton's mapping of the client's
    # region is memory CUDA IPC cannot export again, so the backend copies the input into an
    # allocation of its own that the stub maps; OUT, a view of that, goes from there into
    # the client's output region.
    assert copies_since(gpu_server, model, before) == {"d2d": 2 * N, "d2h": 0, "h2d": 0}
    assert_no_staging(gpu_server)


@pytest.mark.parametrize("model", ["torch_view_yes", "torch_view_default"])
def test_a_gpu_input_arrives_on_the_cpu_when_forced(
    grpc: Any, gpu_server: TritonServer, cuda_regions: Callable[[int], CudaRegion], model: str
) -> None:
    """FORCE_CPU_ONLY_INPUT_TENSORS "yes" (set, or by default): the same CUDA input arrives
    in host memory, one device-to-host copy per request, and as_numpy() works."""
    x = sample()
    region_in = cuda_regions(x.nbytes)
    before = copies(gpu_server, model)
    for i in range(N):
        y = x * (i + 1)
        got = infer(grpc, gpu_server, model, {"IN": (region_in, y)}, VIEW_OUTPUT_NAMES)
        np.testing.assert_array_equal(got["OUT"], y)
        assert got["IN_IS_CPU"].tolist() == [True]
        assert got["OUT_IS_CPU"].tolist() == [True]
        assert got["DEVICE"].tolist() == [KDL_CPU, 0, 0]
        assert got["AS_NUMPY_ERROR"].tolist() == [b""]
    assert copies_since(gpu_server, model, before) == {"d2d": 0, "d2h": N, "h2d": 0}


def test_a_cpu_input_stays_on_the_cpu_when_gpu_inputs_are_allowed(
    grpc: Any, gpu_server: TritonServer
) -> None:
    """FORCE_CPU_ONLY_INPUT_TENSORS "no" lets GPU inputs through; it moves nothing there: a
    gRPC input (host memory) arrives in host memory with no copy at all."""
    x = sample()
    before = copies(gpu_server, "torch_view_no")
    got = infer(grpc, gpu_server, "torch_view_no", {"IN": x}, VIEW_OUTPUT_NAMES)
    np.testing.assert_array_equal(got["OUT"], x)
    assert got["IN_IS_CPU"].tolist() == [True]
    assert got["DEVICE"].tolist() == [KDL_CPU, 0, 0]
    assert copies_since(gpu_server, "torch_view_no", before) == {"d2d": 0, "d2h": 0, "h2d": 0}


def test_a_gpu_output_of_a_side_stream_is_complete_before_the_backend_reads_it(
    grpc: Any, gpu_server: TritonServer
) -> None:
    """torch_side_stream writes OUT on a side stream after spinning the GPU there for ~25 ms
    and hands it over at once: pybackend must wait for that stream (DLPack's stream hand-off)
    before the backend copies, or the client gets the block's previous contents (each
    request's input differs, so a stale read shows)."""
    x = sample()
    for i in range(N):
        y = x + 10 * i
        got = infer(grpc, gpu_server, "torch_side_stream", {"IN": y}, ["OUT"])
        np.testing.assert_allclose(got["OUT"], y * 2 + 1, rtol=1e-6)


def test_an_isolated_stub_sees_only_its_own_device(grpc: Any, gpu_server: TritonServer) -> None:
    """ISOLATE_GPU "yes": the stub of a KIND_GPU instance on device 0 runs with
    CUDA_VISIBLE_DEVICES naming that device only (the server's own list, filtered), sees one
    device as its current one, and its GPU outputs still reach the backend."""
    x = sample()
    got = infer(grpc, gpu_server, "isolated_gpu", {"IN": x}, ["OUT", "VISIBLE", "DEVICES"])
    np.testing.assert_allclose(got["OUT"], x * 2, rtol=1e-6)
    server_list = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    expected = server_list.split(",")[0] if server_list else "0"
    assert got["VISIBLE"].tolist() == [expected.encode()]
    assert got["DEVICES"].tolist() == [1, 0]
