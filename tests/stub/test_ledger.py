"""The stub's ledger (pybackend/stub/ledger.py) in-process, over real socket pairs: each
lifetime's transitions (docs/protocol.md, "Memory lifetimes", stub side) and which carrier
takes a backend block home: RESULT's freed trailer, a FREE on sync, the reader's FREE."""

from __future__ import annotations

import gc
import os
import socket
import time
from types import SimpleNamespace

import numpy as np
import pytest

from pybackend.ipc import codec
from pybackend.ipc.channel import Channel
from pybackend.ipc.codec import GpuRef, RequestDesc, ResultDesc, TensorDesc
from pybackend.ipc.protocol import GPU_HOLD_SEG, Location, MessageKind, Owner, ResultKind
from pybackend.stub.dispatch import Dispatcher
from pybackend.stub.ledger import FLUSH_S, FREE_CHUNK, URGENT_FREE_BYTES
from pybackend.stub.state import StubState
from pybackend.utils import cuda_driver
from pybackend.utils.dlpack import KDL_CUDA, DeviceBuffer
from pybackend.utils.dtypes import TYPE_FP32, TYPE_UINT8


@pytest.fixture()
def parts():
    """(state, the backend's end of sync, of async, the warnings the ledger logged)."""
    sync_peer, sync_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    async_peer, async_stub = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    st = StubState(sync_stub.detach(), async_stub.detach(), "unit_0")
    warnings: list = []
    st.ledger._warn = warnings.append
    st.ledger.gpu_holds._warn = warnings.append
    sync_ch, async_ch = Channel(sync_peer), Channel(async_peer)
    yield st, sync_ch, async_ch, warnings
    st.close()
    sync_ch.close()
    async_ch.close()
    os.close(st.wake_r)
    os.close(st.wake_w)


def woken(st: StubState) -> bool:
    """Whether the reader's wake-up pipe was written since the last look (and drain it)."""
    try:
        return len(os.read(st.wake_r, 4096)) > 0
    except BlockingIOError:
        return False


def frees(ch: Channel) -> list:
    """The blocks of every FREE waiting on ``ch`` (other messages are skipped)."""
    ch.sock.setblocking(False)
    blocks = []
    try:
        while True:
            msg = ch.recv()
            if msg.kind == MessageKind.FREE:
                owner, got = codec.decode_free(msg.body)
                assert owner == Owner.BACKEND
                blocks += got
    except BlockingIOError:
        return blocks
    finally:
        ch.sock.setblocking(True)


def tracked_view(st: StubState, seg: int, off: int) -> np.ndarray:
    """A view of a 64-byte block the ledger tracks, as dispatch.py tracks an input: by the
    object every view keeps alive, which nothing else references."""
    owner = np.frombuffer(bytearray(64), np.uint8)
    st.ledger.track(owner.base, seg, off, 64)
    return owner[8:].view(np.float32)


# ---------------------------------------------------------------------- backend blocks


def test_a_tracked_block_is_queued_only_when_its_last_view_dies(parts) -> None:
    st, _, _, _ = parts
    led = st.ledger
    view = tracked_view(st, 2, 640)
    gc.collect()
    assert not led.queue  # the view still keeps the block
    del view
    assert list(led.queue) == [(2, 640)] and led.pending_bytes == 64
    assert led.armed and woken(st)  # the reader was told once


def test_a_block_that_dies_during_an_ok_result_rides_in_its_trailer(parts) -> None:
    st, sync_ch, async_ch, _ = parts
    led = st.ledger
    view = tracked_view(st, 3, 128)
    led.result_follows()
    del view  # the batch's objects die as execute returns
    assert list(led.queue) == [(3, 128)]
    assert not woken(st) and not led.armed  # RESULT carries it: no thread switch
    result = codec.encode_result(ResultDesc([(ResultKind.NONE, 1, None)], 0))
    led.settle(result)
    assert codec.decode_result(result).freed == [(3, 128)]
    assert not led.queue and not led.result_carries
    assert frees(sync_ch) == [] and frees(async_ch) == []


def test_what_one_trailer_cannot_hold_goes_by_free_on_sync_before_result(parts) -> None:
    st, sync_ch, async_ch, _ = parts
    led = st.ledger
    led.result_follows()
    blocks = [(1, 8 * i) for i in range(FREE_CHUNK + 5)]
    for seg, off in blocks:
        led.give_back(seg, off)
    result = codec.encode_result(ResultDesc([(ResultKind.NONE, 1, None)], 0))
    led.settle(result)
    assert codec.decode_result(result).freed == blocks[:FREE_CHUNK]
    assert frees(sync_ch) == blocks[FREE_CHUNK:] and frees(async_ch) == []
    assert not led.queue


def test_a_batch_error_result_carries_no_trailer_its_blocks_go_by_free_on_sync(parts) -> None:
    st, sync_ch, _, _ = parts
    led = st.ledger
    led.result_follows()
    led.give_back(4, 0)
    result = codec.encode_result_error(13, "boom")
    before = bytes(result)
    led.settle(result)
    assert bytes(result) == before
    assert frees(sync_ch) == [(4, 0)]


def test_an_execute_that_raises_leaves_its_blocks_to_the_reader(parts) -> None:
    st, _, async_ch, _ = parts
    led = st.ledger
    led.result_follows()
    led.give_back(5, 64)
    assert not woken(st)
    led.no_result()
    assert woken(st) and not led.result_carries
    now = time.monotonic()
    due = led.tick(now, None)
    assert due == pytest.approx(now + FLUSH_S) and frees(async_ch) == []
    assert led.tick(due, due) is None
    assert frees(async_ch) == [(5, 64)]


def test_small_blocks_are_batched_by_the_reader_big_ones_go_at_once(parts) -> None:
    st, _, async_ch, _ = parts
    led = st.ledger
    now = time.monotonic()
    led.give_back(0, 0, 4096)
    assert woken(st) and led.armed and not led.urgent
    led.give_back(0, 4096, 4096)
    assert not woken(st)  # armed: one wake-up per batch
    due = led.tick(now, None)
    assert due == pytest.approx(now + FLUSH_S)
    assert frees(async_ch) == []  # batched until FLUSH_S
    led.give_back(0, 1 << 20, URGENT_FREE_BYTES)  # past the urgent threshold
    assert led.urgent and woken(st)
    assert led.tick(now, due) is None  # flushed now, not at ``due``
    assert frees(async_ch) == [(0, 0), (0, 4096), (0, 1 << 20)]
    assert not led.urgent and led.pending_bytes == 0 and not led.armed


def test_a_full_socket_keeps_the_blocks_for_the_next_turn(parts) -> None:
    st, _, async_ch, _ = parts
    led = st.ledger
    while True:
        try:
            st.async_.send(MessageKind.LOG, b"x" * 4000, nonblocking=True)
        except BlockingIOError:
            break
    led.give_back(3, 128)
    led.give_back(3, 256)
    now = time.monotonic()
    assert led.tick(now, now) == pytest.approx(now + FLUSH_S)  # retried soon
    assert list(led.queue) == [(3, 128), (3, 256)]
    assert frees(async_ch) == []  # only the LOGs went out; reading them makes room
    assert led.tick(now + FLUSH_S, now + FLUSH_S) is None
    assert frees(async_ch) == [(3, 128), (3, 256)] and not led.queue


def test_a_failed_batch_returns_the_blocks_of_inputs_never_wrapped(parts) -> None:
    """Decoding stops at an input that cannot be one (location STUB_ARENA): the input
    wrapped before it goes when its tensor dies, the ones after it at once; one outside
    every segment names no block; the freed trailer of EXECUTE is honoured anyway."""
    st, _, async_ch, warnings = parts
    fd = os.memfd_create("unit-peer")
    os.ftruncate(fd, 1 << 16)
    st.peer.add(0, 1 << 16, fd)
    arena = st.make_arena(1 << 16, 1 << 16)
    ours = arena.alloc(256)
    frees(async_ch)  # SEGMENT_ADD of our arena

    def arena_input(name: str, seg: int, off: int, loc: int = Location.BACKEND_ARENA):
        return TensorDesc(name, TYPE_UINT8, loc, (64,), 64, seg, off)

    gpu = TensorDesc("G", TYPE_FP32, Location.GPU_IPC, (1,), 4, data=GpuRef(1, 0, 77, b"h" * 64, 0))
    inputs = [
        arena_input("A", 0, 0),
        arena_input("BAD", 0, 64, Location.STUB_ARENA),
        arena_input("C", 0, 128),
        arena_input("LOST", 9, 0),
        gpu,
    ]
    body = codec.encode_execute([RequestDesc(1, inputs=inputs)], freed=[ours])
    model = SimpleNamespace(execute=lambda requests: pytest.fail("execute ran"))
    d = Dispatcher(st, model, "unit_0", "model.py", decoupled=False)
    result = d.execute(memoryview(body))
    assert codec.decode_result(result).error is not None  # the batch failed
    gc.collect()
    assert sorted(st.ledger.queue) == [(0, 0), (0, 128), (GPU_HOLD_SEG, 77)]
    assert arena.used_bytes == 0 and warnings == []
    now = time.monotonic()
    st.ledger.tick(now, now)
    assert sorted(frees(async_ch)) == [(0, 0), (0, 128), (GPU_HOLD_SEG, 77)]


BIG = 64 << 20  # a 64 MiB tensor: far past URGENT_FREE_BYTES


def peer_segment(st: StubState, size: int) -> None:
    """Segment 0 of the backend's arena, ``size`` bytes (pages are touched only if read)."""
    fd = os.memfd_create("unit-peer")
    os.ftruncate(fd, size)
    st.peer.add(0, size, fd)


def test_wrap_returns_a_block_with_its_size_when_the_last_view_dies(parts) -> None:
    st, _, _, _ = parts
    peer_segment(st, BIG + 4096)
    led = st.ledger
    arr = led.wrap(0, 4096, BIG, lambda buf: buf.view(np.float32).reshape(1024, -1))
    assert arr.shape == (1024, BIG // 4096) and not led.queue
    view = arr[3]
    del arr
    gc.collect()
    assert not led.queue  # a view keeps the block
    del view
    assert list(led.queue) == [(0, 4096)] and led.pending_bytes == BIG
    assert led.urgent and woken(st)  # big: the reader returns it at once


def test_wrap_of_an_empty_tensor_gives_the_block_back_now(parts) -> None:
    st, _, _, _ = parts
    peer_segment(st, 4096)
    arr = st.ledger.wrap(0, 64, 0, lambda buf: buf)
    assert arr.size == 0 and list(st.ledger.queue) == [(0, 64)]


def test_wrap_tracks_nothing_when_the_tensor_cannot_be_made(parts) -> None:
    st, _, _, _ = parts
    peer_segment(st, 4096)

    def refuse(buf: np.ndarray) -> np.ndarray:
        raise ValueError("not this one")

    with pytest.raises(ValueError):
        st.ledger.wrap(0, 64, 64, refuse)
    gc.collect()
    assert not st.ledger.queue  # the caller returns it (give_back_unwrapped)


def test_a_64_mib_bls_output_goes_back_at_once_when_it_dies(parts) -> None:
    """A BLS response's output in the backend's arena is wrapped as an execute input is:
    with its size, so a big one takes the immediate return (URGENT_FREE_BYTES) instead of
    waiting FLUSH_S for company (docs/protocol.md, "Memory lifetimes")."""
    from pybackend.ipc.codec import ResponseDesc
    from pybackend.stub.bls_wire import response_of

    st, _, async_ch, _ = parts
    peer_segment(st, BIG)
    out = TensorDesc("OUT", TYPE_UINT8, Location.BACKEND_ARENA, (BIG,), BIG, 0, 0)
    resp = response_of(st.ledger, ResponseDesc([out]))
    tensor = resp.output_tensors()[0]
    assert tensor.as_numpy().nbytes == BIG and not st.ledger.queue
    del resp, tensor
    gc.collect()
    led = st.ledger
    assert list(led.queue) == [(0, 0)] and led.pending_bytes == BIG and led.urgent
    assert woken(st)
    now = time.monotonic()
    assert led.tick(now, None) is None  # flushed on this turn, not FLUSH_S later
    assert frees(async_ch) == [(0, 0)]


# ---------------------------------------------------------------------- our blocks


def test_our_blocks_come_back_once_unknown_and_double_frees_are_logged(parts) -> None:
    st, _, _, warnings = parts
    arena = st.make_arena(1 << 16, 1 << 16)
    a = arena.alloc(100)
    b = arena.alloc(100)
    used = arena.used_bytes
    st.ledger.returned([(42, 0), a])  # an unknown segment does not cost the good block
    assert 0 < arena.used_bytes < used
    assert len(warnings) == 1 and "ignoring a free" in warnings[0]
    st.ledger.returned([a])  # the same block twice
    assert len(warnings) == 2 and "ignoring a free" in warnings[1]
    st.ledger.returned([b])
    assert arena.used_bytes == 0 and len(warnings) == 2


def test_a_free_before_init_is_a_protocol_error(parts) -> None:
    st, _, _, _ = parts
    with pytest.raises(codec.ProtocolError, match="before INIT"):
        st.ledger.returned([(0, 0)])


def test_references_of_a_message_never_sent_are_dropped(parts) -> None:
    st, _, _, _ = parts
    arena = st.make_arena(1 << 16, 1 << 16)
    blk = arena.alloc(100)
    arena.incref(*blk)  # two messages reference it
    st.ledger.not_sent([blk], [])
    assert arena.used_bytes > 0
    st.ledger.not_sent([blk], [])
    assert arena.used_bytes == 0


# ---------------------------------------------------------------------- GPU


class FakeDriver:
    """Device memory is host memory; every pointer lies in one allocation at ``base``."""

    def __init__(self, base: int) -> None:
        self.base = base
        self.closed: list = []

    def address_range(self, device: int, ptr: int):
        return self.base, 1 << 20

    def ipc_handle(self, device: int, base: int) -> bytes:
        return b"S" * 64

    def open_ipc(self, device: int, handle: bytes) -> int:
        return self.base

    def close_ipc(self, device: int, ptr: int) -> None:
        self.closed.append(ptr)


@pytest.fixture()
def driver():
    host = np.zeros(256, np.uint8)
    drv = FakeDriver(host.ctypes.data)
    old = cuda_driver.use_driver(drv)
    yield drv
    cuda_driver.use_driver(old)


def test_a_gpu_hold_is_released_once(parts, driver) -> None:
    st, _, _, warnings = parts
    st.make_arena(1 << 16, 1 << 16)
    led = st.ledger
    kept = []
    buf = DeviceBuffer(driver.base + 16, 32, KDL_CUDA, 0, release=lambda: kept.append("gone"))
    ref = led.share_gpu(buf)
    assert ref is not None and ref.offset == 16 and len(led.gpu_holds) == 1
    del buf
    assert kept == []  # held for the backend
    led.returned([(GPU_HOLD_SEG, ref.hold)])
    assert kept == ["gone"] and len(led.gpu_holds) == 0 and warnings == []
    led.returned([(GPU_HOLD_SEG, ref.hold)])  # a second return of the same hold
    assert len(warnings) == 1 and f"GPU hold {ref.hold}" in warnings[0]


def test_a_gpu_hold_of_a_message_never_sent_is_dropped(parts, driver) -> None:
    st, _, _, _ = parts
    led = st.ledger
    ref = led.share_gpu(DeviceBuffer(driver.base, 8, KDL_CUDA, 0))
    assert ref is not None
    led.not_sent([], [ref.hold])
    assert len(led.gpu_holds) == 0


def test_lent_gpu_memory_is_unmapped_and_its_hold_queued_when_the_tensor_dies(
    parts, driver
) -> None:
    """With the lending pool off (PYBACKEND_GPU_LEND_POOL=0): the mapping of lent memory is
    closed with its tensor (the pool's side: the next test)."""
    st, _, _, _ = parts
    led = st.ledger
    led.gpu_maps.keep_lent = False
    lent = led.map_gpu(GpuRef(int(Owner.BACKEND), 0, 31, b"B" * 64, 8), 16)
    cached = led.map_gpu(GpuRef(int(Owner.BACKEND), 0, 0, b"P" * 64, 0), 16)
    assert lent.ptr == driver.base + 8
    del cached
    gc.collect()
    assert not led.queue  # Triton's pool (hold 0) stays mapped, nothing to return
    del lent
    gc.collect()
    assert list(led.queue) == [(GPU_HOLD_SEG, 31)] and driver.closed == [driver.base]


class CountingDriver(FakeDriver):
    """FakeDriver that counts the mappings it opens (each one costs a cuIpcOpenMemHandle)."""

    def __init__(self, base: int) -> None:
        super().__init__(base)
        self.opened: list = []

    def open_ipc(self, device: int, handle: bytes) -> int:
        self.opened.append(handle)
        return self.base


@pytest.mark.parametrize("keep_lent", [False, True])
def test_lent_gpu_memory_mapped_per_request_or_kept_under_the_lending_pool(
    parts, keep_lent
) -> None:
    """Two requests lent the same allocation (the backend's lending pool reuses it, same
    handle): with PYBACKEND_GPU_LEND_POOL=0 each maps and unmaps it; under the pool the mapping is
    opened once and kept, and each hold still goes back when its tensor dies."""
    st, _, _, _ = parts
    host = np.zeros(256, np.uint8)
    drv = CountingDriver(host.ctypes.data)
    old = cuda_driver.use_driver(drv)
    try:
        led = st.ledger
        led.gpu_maps.keep_lent = keep_lent
        for hold in (41, 42):
            lent = led.map_gpu(GpuRef(int(Owner.BACKEND), 0, hold, b"L" * 64, 0), 16)
            assert lent.ptr == drv.base
            assert led.gpu_maps.find(drv.base) == (0, b"L" * 64)  # an output view goes back
            del lent
            gc.collect()
            assert list(led.queue)[-1] == (GPU_HOLD_SEG, hold)
        assert list(led.queue) == [(GPU_HOLD_SEG, 41), (GPU_HOLD_SEG, 42)]
        if keep_lent:
            assert drv.opened == [b"L" * 64] and drv.closed == []
            assert len(led.gpu_maps) == 1
            led.gpu_maps.close()
            assert drv.closed == [drv.base]
        else:
            assert drv.opened == [b"L" * 64] * 2 and drv.closed == [drv.base] * 2
            assert len(led.gpu_maps) == 0
    finally:
        cuda_driver.use_driver(old)


def test_the_lending_pool_is_read_from_the_environment(monkeypatch) -> None:
    """On unless "0", "false", "off" or "no", the backend's rule (it sets the variable for
    every stub it starts; an attach-mode process sees the user's environment, unset there
    meaning on as well)."""
    from pybackend.stub.gpu import LEND_POOL_ENV, GpuMappings

    monkeypatch.delenv(LEND_POOL_ENV, raising=False)
    assert GpuMappings(lambda hold: None).keep_lent is True
    monkeypatch.setenv(LEND_POOL_ENV, "1")
    assert GpuMappings(lambda hold: None).keep_lent is True
    for off in ("0", "false", "OFF", "no"):
        monkeypatch.setenv(LEND_POOL_ENV, off)
        assert GpuMappings(lambda hold: None).keep_lent is False


def test_an_output_at_the_start_of_backend_memory_is_shared_without_a_driver_call(parts) -> None:
    """The zero-copy identity returns its lent input as it is: the output's pointer is the
    mapping's base, so no cuMemGetAddressRange; a view further in still asks the driver."""
    st, _, _, _ = parts
    host = np.zeros(256, np.uint8)
    calls: list = []

    class Driver(CountingDriver):
        def address_range(self, device: int, ptr: int):
            calls.append(ptr)
            return super().address_range(device, ptr)

    drv = Driver(host.ctypes.data)
    old = cuda_driver.use_driver(drv)
    try:
        led = st.ledger
        lent = led.map_gpu(GpuRef(int(Owner.BACKEND), 0, 7, b"L" * 64, 0), 64)
        # Under the lending pool the mapping is cached, and a cached mapping asks its size
        # once, when it is opened: not a call of the request's output.
        calls.clear()
        ref = led.share_gpu(DeviceBuffer(lent.ptr, 64, KDL_CUDA, 0))
        assert ref is not None and calls == []
        assert (ref.owner, ref.handle, ref.offset) == (int(Owner.BACKEND), b"L" * 64, 0)
        ref = led.share_gpu(DeviceBuffer(lent.ptr + 16, 16, KDL_CUDA, 0))
        assert ref is not None and calls == [lent.ptr + 16]
        assert (ref.owner, ref.offset) == (int(Owner.BACKEND), 16)
    finally:
        cuda_driver.use_driver(old)
