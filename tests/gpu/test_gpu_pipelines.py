"""GPU tensors between models, through the real tritonserver: an ensemble of two python
models passes a GPU tensor from one to the next, and a BLS call sends a GPU tensor and gets
its outputs back on the GPU (or on the CPU) as preferred_memory asks. Placement is reported
from inside the stubs; copies are counted by the backend (pybackend_gpu_copies_total)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pytest
from gpu_io_models import VIEW_OUTPUT_NAMES
from gpu_support import (
    KDL_CPU,
    KDL_CUDA,
    N,
    assert_no_staging,
    assert_pointers,
    copies,
    copies_since,
    infer,
    sample,
)

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu


def test_an_ensemble_passes_a_gpu_tensor_between_python_models(
    grpc: Any, gpu_server: TritonServer
) -> None:
    """ens_produce returns a CUDA tensor through Tensor.from_dlpack; torch_copy_no (with
    FORCE_CPU_ONLY_INPUT_TENSORS "no") receives it on the GPU. Inside the pipeline nothing
    visits the host: each step's GPU output is one device copy into the GPU buffer Triton's
    ensemble scheduler allocates for it (for the final output too: the scheduler itself, not
    the backend, copies that into the gRPC response), and the intermediate tensor, in
    Triton's CUDA pool, reaches the next stub with no copy at all."""
    x = sample()
    before = {m: copies(gpu_server, m) for m in ("ens_produce", "torch_copy_no")}
    for i in range(N):
        y = x + i
        got = infer(grpc, gpu_server, "ensemble_gpu", {"IN": y}, VIEW_OUTPUT_NAMES)
        np.testing.assert_allclose(got["OUT"], y * 2, rtol=1e-6)
        assert got["IN_IS_CPU"].tolist() == [False]
        assert got["OUT_IS_CPU"].tolist() == [False]
        assert got["DEVICE"].tolist() == [KDL_CUDA, 0, 0]
        assert_pointers(got["PTRS"], view=False)
    assert copies_since(gpu_server, "ens_produce", before["ens_produce"]) == {
        "d2d": N,
        "d2h": 0,
        "h2d": 0,
    }
    assert copies_since(gpu_server, "torch_copy_no", before["torch_copy_no"]) == {
        "d2d": N,
        "d2h": 0,
        "h2d": 0,
    }
    assert_no_staging(gpu_server)


def test_an_ensemble_step_forced_to_the_cpu_gets_the_gpu_tensor_in_host_memory(
    grpc: Any, gpu_server: TritonServer
) -> None:
    """The same GPU intermediate tensor, to torch_view_yes: it arrives on the CPU, copied
    device to host once by the backend; its numpy output needs no copy."""
    x = sample()
    before = copies(gpu_server, "torch_view_yes")
    for _ in range(N):
        got = infer(grpc, gpu_server, "ensemble_gpu_cpu", {"IN": x}, VIEW_OUTPUT_NAMES)
        np.testing.assert_allclose(got["OUT"], x * 2, rtol=1e-6)
        assert got["IN_IS_CPU"].tolist() == [True]
        assert got["DEVICE"].tolist() == [KDL_CPU, 0, 0]
    assert copies_since(gpu_server, "torch_view_yes", before) == {"d2d": 0, "d2h": N, "h2d": 0}


@pytest.mark.parametrize("prefer_gpu", [True, False], ids=["preferred-gpu", "preferred-cpu"])
def test_bls_sends_a_gpu_tensor_and_gets_outputs_where_preferred(
    grpc: Any,
    gpu_server: TritonServer,
    prefer_gpu: bool,
    record_property: Callable[[str, object], None],
) -> None:
    """bls_gpu calls torch_copy_no with a torch CUDA tensor as input: the callee receives it
    on the GPU. With preferred_memory GPU the BLS output comes back as a GPU tensor (its
    __dlpack_device__ says CUDA), with CPU as a host tensor. Neither way does a tensor take
    a host round trip: the only device-to-host copy is the one output that must reach host
    memory (the caller's gRPC response, or the callee's GPU output the caller wants on the
    CPU), and the only host-to-device copy the callee's one host output (IN_IS_CPU) put into
    the GPU buffer a GPU preference asks for (every BLS output then lives on the GPU). The
    caller's backend copies nothing else: the callee reads the BLS input where it lies. (The
    callee's device copies are recorded, not asserted: how it gets at memory the server
    itself imported from the caller's stub is the backend's choice.)"""
    x = sample()
    models = ("bls_gpu", "torch_copy_no")
    before = {m: copies(gpu_server, m) for m in models}
    for i in range(N):
        y = x * (i + 2)
        got = infer(
            grpc,
            gpu_server,
            "bls_gpu",
            {"IN": y, "PREFER_GPU": np.array([prefer_gpu])},
            ["OUT", "BLS_OUT_IS_CPU", "BLS_OUT_DEVICE", "CALLEE_IN_IS_CPU"],
        )
        np.testing.assert_array_equal(got["OUT"], y)
        assert got["CALLEE_IN_IS_CPU"].tolist() == [False]
        assert got["BLS_OUT_IS_CPU"].tolist() == [not prefer_gpu]
        assert got["BLS_OUT_DEVICE"].tolist() == ([KDL_CUDA, 0] if prefer_gpu else [KDL_CPU, 0])
    caller, callee = (copies_since(gpu_server, m, before[m]) for m in models)
    record_property("copies", {"caller": caller, "callee": callee})
    assert caller == {"d2d": 0, "d2h": N if prefer_gpu else 0, "h2d": 0}, (caller, callee)
    assert (callee["d2h"], callee["h2d"]) == ((0, N) if prefer_gpu else (N, 0)), (caller, callee)
    assert_no_staging(gpu_server)
