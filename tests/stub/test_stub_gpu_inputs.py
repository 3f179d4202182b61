"""GPU inputs on the stub's side, without a GPU (FORCE_CPU_ONLY_INPUT_TENSORS "no"): a fake
driver records the IPC mappings. Triton's own memory (hold 0) is mapped once per allocation
and kept; memory lent for one tensor is unmapped and returned to the backend when the tensor
dies. The real calls run in tests/gpu/."""

from __future__ import annotations

import gc

import pytest

from pybackend.ipc.codec import GpuRef
from pybackend.ipc.protocol import Owner
from pybackend.stub.gpu import GpuMappings
from pybackend.utils import cuda_driver
from pybackend.utils.dlpack import KDL_CUDA
from pybackend.utils.dtypes import TYPE_FP32
from pybackend.utils.errors import TritonModelException
from pybackend.utils.tensor import GPU_AS_NUMPY, Tensor


class FakeDriver:
    def __init__(self) -> None:
        self.opened = []
        self.closed = []

    def open_ipc(self, device: int, handle: bytes) -> int:
        self.opened.append((device, handle))
        return 0x10000 * len(self.opened)

    def close_ipc(self, device: int, ptr: int) -> None:
        self.closed.append((device, ptr))

    def address_range(self, device: int, ptr: int):
        return ptr, self.size

    size = 1 << 20


@pytest.fixture()
def driver():
    d = FakeDriver()
    old = cuda_driver.use_driver(d)  # type: ignore[arg-type]
    yield d
    cuda_driver.use_driver(old)


def ref(handle: bytes, hold: int = 0, offset: int = 0) -> GpuRef:
    return GpuRef(int(Owner.BACKEND), 0, hold, handle.ljust(64, b"\0"), offset)


def test_triton_memory_is_mapped_once_per_allocation(driver) -> None:
    given_back = []
    m = GpuMappings(given_back.append)
    a = m.buffer(ref(b"pool", offset=256), 64)
    b = m.buffer(ref(b"pool", offset=512), 64)
    assert len(driver.opened) == 1 and len(m) == 1
    assert (a.ptr, b.ptr) == (0x10000 + 256, 0x10000 + 512)
    t = Tensor._on_device("IN", TYPE_FP32, (16,), a)
    assert not t.is_cpu() and t.__dlpack_device__() == (KDL_CUDA, 0)
    with pytest.raises(TritonModelException) as e:
        t.as_numpy()
    assert str(e.value) == GPU_AS_NUMPY
    del a, b, t
    gc.collect()
    assert driver.closed == [] and given_back == []  # kept for the next request
    m.close()
    assert driver.closed == [(0, 0x10000)]


def test_the_mapping_cache_is_bounded(driver) -> None:
    m = GpuMappings(lambda hold: None)
    for i in range(GpuMappings.MAX_OPEN + 3):
        m.buffer(ref(b"alloc%d" % i), 4)  # dies at once: the mapping is idle
    assert len(m) == GpuMappings.MAX_OPEN
    assert driver.closed == [(0, 0x10000 * (i + 1)) for i in range(3)]  # the oldest ones


def test_a_mapping_in_use_is_never_closed(driver) -> None:
    m = GpuMappings(lambda hold: None)
    live = [m.buffer(ref(b"alloc%d" % i), 4) for i in range(GpuMappings.MAX_OPEN + 3)]
    assert driver.closed == [] and len(m) == GpuMappings.MAX_OPEN + 3
    del live
    gc.collect()
    assert len(driver.closed) == 3 and len(m) == GpuMappings.MAX_OPEN


def test_idle_mappings_are_bounded_in_bytes(driver) -> None:
    """A mapping keeps Triton's allocation alive even after Triton freed it: big idle ones
    (tensors larger than Triton's CUDA pool) must not pile up."""
    driver.size = 100 << 20
    m = GpuMappings(lambda hold: None)
    a = m.buffer(ref(b"big-a"), 4)
    m.buffer(ref(b"big-b"), 4)
    m.buffer(ref(b"big-c"), 4)
    assert len(driver.closed) == 0  # 200 MiB idle: within MAX_IDLE_BYTES
    m.buffer(ref(b"big-d"), 4)
    assert driver.closed == [(0, 0x20000)]  # b, the oldest idle one; a is in use
    assert a.ptr == 0x10000


def test_lent_memory_is_unmapped_and_returned_when_the_tensor_dies(driver) -> None:
    """With the lending pool off (under it the mapping is cached: test_ledger.py)."""
    given_back = []
    m = GpuMappings(given_back.append, keep_lent=False)
    t = Tensor._on_device("IN", TYPE_FP32, (4,), m.buffer(ref(b"lent", hold=7), 16))
    view = Tensor.from_dlpack("SAME", t)  # renamed: the same memory
    del t
    gc.collect()
    assert given_back == []
    del view
    gc.collect()
    assert driver.closed == [(0, 0x10000)] and given_back == [7]
    assert len(m) == 0  # lent memory is never cached
