"""GPU tensors into and out of a callable bound with pybackend.pytriton
(``Tensor(..., device="cuda")``), through the real tritonserver on a GPU.

No copy, shown by device addresses: a GPU input (the client's CUDA shared memory) reaches
the callable as a torch tensor whose address lies outside every allocation of torch's
allocator (it is the backend's memory, mapped through CUDA IPC, not a copy the stub made),
and the callable returns that very tensor; a host input instead lands in torch's memory (the
one host-to-device copy). The backend's copy counters (pybackend_gpu_copies_total) show no
host round trip: the same two device copies per request as a plain model.py returning a
view of its GPU input (tests/gpu/test_gpu_zero_copy.py says why there are two)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from gpu_support import CudaRegion, copies, copies_since, cuda_regions_of, infer

from integration_support.pytriton_helpers import loopback_config
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton, TritonSecurityConfig

pytestmark = pytest.mark.gpu

N = 3
IO = {
    "inputs": [Tensor(name="IN", dtype=np.float32, shape=(-1,), device="cuda")],
    "outputs": [Tensor(name="OUT", dtype=np.float32, shape=(-1,), device="cuda")],
}


def _in_torch_memory(ptr: int) -> bool:
    """Whether ``ptr`` lies in a segment torch's caching allocator holds."""
    import torch

    return any(
        seg["address"] <= ptr < seg["address"] + seg["total_size"]
        for seg in torch.cuda.memory_snapshot()
    )


class Identity:
    """Returns its input tensor; records what it got."""

    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def __call__(self, requests: list[Any]) -> list[dict[str, Any]]:
        out = []
        for r in requests:
            x = r["IN"]
            self.seen.append(
                {
                    "kind": (type(x).__module__.split(".")[0], str(x.device)),
                    "ptr": x.data_ptr(),
                    "in_torch_memory": _in_torch_memory(x.data_ptr()),
                }
            )
            out.append({"OUT": x})
        return out


@pytest.fixture
def bound() -> Iterator[tuple[Triton, Identity]]:
    config = loopback_config()
    # The shared-memory endpoints stay open for the client's CUDA regions.
    triton = Triton(config=config, security_config=TritonSecurityConfig(restricted_endpoints=[]))
    model = Identity()
    try:
        triton.bind("gpu_identity", model, **IO, config=ModelConfig(batching=False))
        triton.run()
        yield triton, model
    finally:
        triton.stop()


@pytest.fixture
def grpc(bound: tuple[Triton, Identity]) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    server = bound[0].server
    assert server is not None
    client = grpcclient.InferenceServerClient(url=server.grpc_url)
    yield client
    client.close()


def test_a_gpu_input_is_not_copied_and_the_output_goes_device_to_device(
    bound: tuple[Triton, Identity], grpc: Any
) -> None:
    triton, model = bound
    server = triton.server
    assert server is not None
    x = np.arange(1 << 16, dtype=np.float32)
    with cuda_regions_of(grpc, "pytriton-gpu") as make:
        region_in: CudaRegion = make(x.nbytes)
        region_out: CudaRegion = make(x.nbytes)
        before = copies(server, "gpu_identity")
        for i in range(N):
            y = x + i
            region_out.write(np.zeros_like(y))
            got = infer(
                grpc,
                server,
                "gpu_identity",
                {"IN": (region_in, y)},
                ["OUT"],
                {"OUT": (region_out, y.nbytes)},
            )
            np.testing.assert_array_equal(got["OUT"], y)
        moved = copies_since(server, "gpu_identity", before)
    # torch is installed wherever this suite runs (conftest.py), so inputs are torch tensors.
    assert {s["kind"] for s in model.seen} == {("torch", "cuda:0")}, model.seen
    # Not an allocation of torch's: the stub wrapped the mapped memory, it copied nothing.
    assert not any(s["in_torch_memory"] for s in model.seen), model.seen
    assert moved == {"d2d": 2 * N, "d2h": 0, "h2d": 0}


def test_a_host_input_is_copied_to_the_instance_device_once(
    bound: tuple[Triton, Identity], grpc: Any
) -> None:
    triton, model = bound
    server = triton.server
    assert server is not None
    x = np.linspace(0, 1, 1024, dtype=np.float32)
    before = copies(server, "gpu_identity")
    got = infer(grpc, server, "gpu_identity", {"IN": x}, ["OUT"])
    np.testing.assert_array_equal(got["OUT"], x)
    assert model.seen[-1]["kind"] == ("torch", "cuda:0")
    # The stub copied the host bytes into torch's memory on the device (the address
    # comparison of the test above, the other way round); the output left the device once,
    # into gRPC's host buffer.
    assert model.seen[-1]["in_torch_memory"]
    assert copies_since(server, "gpu_identity", before) == {"d2d": 0, "d2h": 1, "h2d": 0}
