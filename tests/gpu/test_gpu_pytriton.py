"""GPU tensors into and out of a callable bound with pybackend.pytriton
(``Tensor(..., device="cuda")``), through the real tritonserver on a GPU.

Zero copy, shown three ways: the callable adds 1 to its input *in place* and the client
reads the change back from its own CUDA shared-memory input region (the callable held the
client's memory, not a copy); the address the callable saw is the same on every request
through one region (mapped once, never copied); and the backend's copy counters
(pybackend_gpu_copies_total) show one device-to-device copy per request, into the client's
output region, and nothing through the host."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from gpu_support import CudaRegion, copies, copies_since, cuda_regions_of, infer

from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton, TritonConfig, TritonSecurityConfig
from pybackend.server.processes import free_ports

pytestmark = pytest.mark.gpu

N = 3
IO = {
    "inputs": [Tensor(name="IN", dtype=np.float32, shape=(-1,), device="cuda")],
    "outputs": [Tensor(name="OUT", dtype=np.float32, shape=(-1,), device="cuda")],
}


class InPlace:
    """Adds 1 to its input where it lies and returns that same tensor."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int]] = []

    def __call__(self, requests: list[Any]) -> list[dict[str, Any]]:
        out = []
        for r in requests:
            x = r["IN"]
            self.seen.append((type(x).__module__.split(".")[0], str(x.device), x.data_ptr()))
            x.add_(1)
            out.append({"OUT": x})
        return out


@pytest.fixture
def bound() -> Iterator[tuple[Triton, InPlace]]:
    http, grpc, metrics = free_ports(3, "127.0.0.1")
    config = TritonConfig(
        http_address="127.0.0.1",
        grpc_address="127.0.0.1",
        metrics_address="127.0.0.1",
        http_port=http,
        grpc_port=grpc,
        metrics_port=metrics,
    )
    # The shared-memory endpoints stay open for the client's CUDA regions.
    triton = Triton(config=config, security_config=TritonSecurityConfig(restricted_endpoints=[]))
    model = InPlace()
    try:
        triton.bind("gpu_inplace", model, **IO, config=ModelConfig(batching=False))
        triton.run()
        yield triton, model
    finally:
        triton.stop()


@pytest.fixture
def grpc(bound: tuple[Triton, InPlace]) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    server = bound[0].server
    assert server is not None
    client = grpcclient.InferenceServerClient(url=server.grpc_url)
    yield client
    client.close()


def test_a_gpu_input_is_the_clients_memory_and_the_output_goes_device_to_device(
    bound: tuple[Triton, InPlace], grpc: Any
) -> None:
    triton, model = bound
    server = triton.server
    assert server is not None
    x = np.arange(1 << 16, dtype=np.float32)
    with cuda_regions_of(grpc, "pytriton-gpu") as make:
        region_in: CudaRegion = make(x.nbytes)
        region_out: CudaRegion = make(x.nbytes)
        before = copies(server, "gpu_inplace")
        for i in range(N):
            y = x + i
            got = infer(
                grpc,
                server,
                "gpu_inplace",
                {"IN": (region_in, y)},
                ["OUT"],
                {"OUT": (region_out, y.nbytes)},
            )
            np.testing.assert_array_equal(got["OUT"], y + 1)
            # The callable wrote into the client's own input region: no copy on the way in.
            np.testing.assert_array_equal(region_in.read(np.float32, y.size), y + 1)
        moved = copies_since(server, "gpu_inplace", before)
    assert moved == {"d2d": N, "d2h": 0, "h2d": 0}
    # torch is installed wherever this suite runs (conftest.py), so inputs are torch tensors.
    assert {(s[0], s[1]) for s in model.seen} == {("torch", "cuda:0")}, model.seen
    assert len({s[2] for s in model.seen}) == 1, model.seen  # one mapping, every request


def test_a_host_input_is_copied_to_the_instance_device_once(
    bound: tuple[Triton, InPlace], grpc: Any
) -> None:
    triton, model = bound
    server = triton.server
    assert server is not None
    x = np.linspace(0, 1, 1024, dtype=np.float32)
    before = copies(server, "gpu_inplace")
    got = infer(grpc, server, "gpu_inplace", {"IN": x}, ["OUT"])
    np.testing.assert_allclose(got["OUT"], x + 1)
    assert model.seen[-1][:2] == ("torch", "cuda:0")
    # The stub copied the host bytes to the device (torch/cupy, not the backend); the
    # output left the device once, into gRPC's host buffer.
    assert copies_since(server, "gpu_inplace", before) == {"d2d": 0, "d2h": 1, "h2d": 0}
