"""GPU outputs on the stub's side, without a GPU: a fake driver over host memory stands for
CUDA. Checks what the stub sends for a GPU tensor (a GPU_IPC reference to the allocation,
held until the backend returns it), that the hold keeps the producer's memory alive exactly
that long, and the staging through host memory when CUDA IPC is unavailable (UV-29). The
real driver calls and the backend's copies run in tests/gpu/ on a GPU."""

from __future__ import annotations

import ctypes
import gc
import socket
import weakref

import numpy as np
import pytest

from pybackend.ipc import codec
from pybackend.ipc.protocol import GPU_HOLD_SEG, Location, Owner
from pybackend.stub.outputs import Placer
from pybackend.stub.state import StubState
from pybackend.utils import cuda_driver, dlpack
from pybackend.utils.cuda_driver import CudaError
from pybackend.utils.dlpack import KDL_CUDA, DeviceBuffer
from pybackend.utils.dtypes import TYPE_FP32
from pybackend.utils.response import InferenceResponse
from pybackend.utils.tensor import Tensor

HANDLE = bytes(range(64))


class FakeDriver:
    """Device memory is host memory here; the allocation base is ``base``."""

    def __init__(self, base: int, ipc_ok: bool = True) -> None:
        self.base = base
        self.ipc_ok = ipc_ok
        self.copies = []

    def proxy_stream(self, device: int) -> int:
        return 1

    def sync_stream(self, device: int, stream: int) -> None:
        pass

    def synchronize(self, device: int) -> None:
        pass

    def address_range(self, device: int, ptr: int):
        return self.base, 1 << 30

    def ipc_handle(self, device: int, base: int):
        if not self.ipc_ok:
            raise CudaError(
                "cuIpcGetMemHandle failed", "cuIpcGetMemHandle", "CUDA_ERROR_NOT_SUPPORTED"
            )
        assert base == self.base
        return HANDLE

    def open_ipc(self, device: int, handle: bytes) -> int:
        return self.base

    def close_ipc(self, device: int, ptr: int) -> None:
        pass

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self.copies.append(("d2h", device, nbytes))
        ctypes.memmove(dst, src, nbytes)


class Producer:
    pass


def gpu_tensor(host: np.ndarray, device: int = 0):
    """A Tensor over ``host`` announced as CUDA memory; a weakref to the producer."""
    owner = Producer()
    owner.host = host  # type: ignore[attr-defined]
    buf = DeviceBuffer(host.ctypes.data, host.nbytes, KDL_CUDA, device)
    capsule = dlpack.export(owner, buf, TYPE_FP32, host.shape)
    return Tensor.from_dlpack("OUT", capsule), weakref.ref(owner)


@pytest.fixture()
def state():
    sync_peer, sync_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    async_peer, async_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    st = StubState(sync_stub.detach(), async_stub.detach(), "unit_0")
    st.make_arena(1 << 20, 1 << 20)
    yield st
    st.close()
    sync_peer.close()
    async_peer.close()


def use(driver):
    return cuda_driver.use_driver(driver)


def test_a_gpu_output_travels_as_an_ipc_reference_held_until_returned(state) -> None:
    alloc = np.arange(64, dtype=np.float32)
    old = use(FakeDriver(alloc.ctypes.data))
    try:
        view = alloc[16:28]  # 12 floats at byte 64 of the allocation
        t, producer = gpu_tensor(view)
        p = Placer(state, for_send=False)
        body = p.response(InferenceResponse([t]), None)
        resp = codec.read_response(codec.Reader(bytes(body)))
        (out,) = resp.outputs
        assert out.location == Location.GPU_IPC and out.byte_size == 48
        ref = out.data
        assert (ref.owner, ref.device, ref.handle, ref.offset) == (Owner.STUB, 0, HANDLE, 64)
        assert p.holds == [ref.hold] and len(state.ledger.gpu_holds) == 1
        del t, view
        gc.collect()
        assert producer() is not None  # held for the backend
        state.ledger.returned([(GPU_HOLD_SEG, ref.hold)])  # the backend has copied it
        gc.collect()
        assert producer() is None and len(state.ledger.gpu_holds) == 0
    finally:
        use(old)


def test_an_aborted_message_drops_its_holds(state) -> None:
    old = use(FakeDriver(0))
    try:
        t, producer = gpu_tensor(np.ones(4, np.float32))
        p = Placer(state, for_send=True)
        p.response(InferenceResponse([t]), None)
        del t
        p.abort()
        gc.collect()
        assert producer() is None and len(state.ledger.gpu_holds) == 0
    finally:
        use(old)


def test_an_unknown_hold_is_logged_not_fatal(state) -> None:
    state.ledger.returned([(GPU_HOLD_SEG, 12345)])
    assert len(state.ledger.gpu_holds) == 0


def test_without_cuda_ipc_the_output_is_staged_through_host_memory_with_one_warning(
    state,
) -> None:
    drv = FakeDriver(0, ipc_ok=False)
    old = use(drv)
    warnings = []
    state.ledger.gpu_holds._warn = warnings.append
    try:
        host = np.arange(8, dtype=np.float32)
        for _ in range(2):
            t, _ = gpu_tensor(host)
            p = Placer(state, for_send=False)
            desc = p.tensor(t)
            assert desc.location == Location.STUB_ARENA and desc.byte_size == 32
            staged = state.arena.buffer(desc.seg, desc.offset, 32).view(np.float32)
            np.testing.assert_array_equal(staged, host)  # the bytes are in shared memory
            p.abort()
        assert drv.copies == [("d2h", 0, 32)] * 2
        assert len(warnings) == 1 and "CUDA IPC is not available" in warnings[0]
    finally:
        use(old)


def test_other_cuda_failures_are_not_hidden_by_staging(state) -> None:
    class Broken(FakeDriver):
        def address_range(self, device, ptr):
            raise CudaError("boom", "cuCtxPushCurrent", "CUDA_ERROR_ILLEGAL_ADDRESS")

    old = use(Broken(0))
    try:
        t, _ = gpu_tensor(np.ones(2, np.float32))
        with pytest.raises(CudaError, match="boom"):
            Placer(state, for_send=False).tensor(t)
    finally:
        use(old)


def test_a_view_of_a_gpu_input_goes_back_under_the_backends_own_handle(state) -> None:
    """Memory a process imported cannot be exported again: an output lying in memory the
    backend shared with us is named by the backend's handle, and held like any output."""
    alloc = np.zeros(64, dtype=np.float32)
    drv = FakeDriver(alloc.ctypes.data)
    old = use(drv)
    try:
        theirs = codec.GpuRef(int(Owner.BACKEND), 5, 9, b"B" * 64, 0)
        given_back = []
        state.ledger.gpu_maps._give_back = given_back.append
        t_in = Tensor._on_device("IN", TYPE_FP32, (64,), state.ledger.map_gpu(theirs, 256))
        view = DeviceBuffer(alloc.ctypes.data + 128, 32, KDL_CUDA, 5)
        view.owner = t_in  # as a torch view keeps its base alive
        out = Tensor._on_device("OUT", TYPE_FP32, (8,), view)
        p = Placer(state, for_send=True)
        desc = p.tensor(out)
        ref = desc.data
        assert desc.location == Location.GPU_IPC
        assert (ref.owner, ref.device, ref.handle, ref.offset) == (Owner.BACKEND, 5, b"B" * 64, 128)
        del t_in, view, out
        gc.collect()
        assert given_back == []  # the stub's hold keeps the input (and the lent memory)
        state.ledger.returned([(GPU_HOLD_SEG, ref.hold)])
        gc.collect()
        assert given_back == [9]  # then the lent memory goes home
    finally:
        use(old)
