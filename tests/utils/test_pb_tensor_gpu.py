"""GPU tensors of pb_utils.Tensor without a GPU: fake CUDA producers (DLPack capsules whose
device says kDLCUDA over host memory) and a fake driver that records what the stub asks of
CUDA. What needs a real GPU (the driver calls themselves) is in tests/gpu/."""

from __future__ import annotations

import ctypes
import gc
import os
import weakref
from typing import Any, List, Tuple

import numpy as np
import pytest

from pybackend.utils import cuda_driver, dlpack
from pybackend.utils.dlpack import KDL_CUDA, KDL_CUDA_HOST, DeviceBuffer
from pybackend.utils.dtypes import TYPE_BF16, TYPE_FP32, TYPE_INT64
from pybackend.utils.errors import TritonModelException
from pybackend.utils.tensor import GPU_AS_NUMPY, Tensor


class FakeDriver:
    """Records the stream hand-offs and synchronizations from_dlpack asks for."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []

    def copy_to_host(self, device: int, dst: int, src: int, nbytes: int) -> None:
        self.calls.append(("copy_to_host", device, nbytes))
        ctypes.memmove(dst, src, nbytes)

    def proxy_stream(self, device: int) -> int:
        self.calls.append(("proxy_stream", device))
        return 0x5000 + device

    def sync_stream(self, device: int, stream: int) -> None:
        self.calls.append(("sync_stream", device, stream))

    def synchronize(self, device: int) -> None:
        self.calls.append(("synchronize", device))


@pytest.fixture
def fake_driver():
    d = FakeDriver()
    old = cuda_driver.use_driver(d)  # type: ignore[arg-type]
    yield d
    cuda_driver.use_driver(old)


class Owner:
    """Stands for the producer's memory: alive while its capsule's tensor is."""


def fake_cuda_capsule(host: np.ndarray, code: int, device: int = 0, kind: int = KDL_CUDA):
    """A 'dltensor' capsule announcing ``host``'s bytes as memory of CUDA device
    ``device``; returns (capsule, weakref to what the producer keeps alive)."""
    owner = Owner()
    owner.host = host  # type: ignore[attr-defined]
    buf = DeviceBuffer(host.ctypes.data, host.nbytes, kind, device)
    return dlpack.export(owner, buf, code, host.shape), weakref.ref(owner)


class FakeCudaArray:
    """A producer with __dlpack__/__dlpack_device__ (as torch and cupy CUDA tensors)."""

    def __init__(self, host: np.ndarray, code: int, device: int = 0) -> None:
        self.host = host
        self.code = code
        self.device = device
        self.streams: List[Any] = []

    def __dlpack_device__(self) -> Tuple[int, int]:
        return (KDL_CUDA, self.device)

    def __dlpack__(self, stream: Any = None) -> Any:
        self.streams.append(stream)
        return fake_cuda_capsule(self.host, self.code, self.device)[0]


def test_from_dlpack_of_a_cuda_producer_hands_off_on_the_proxy_stream(fake_driver):
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    src = FakeCudaArray(host, TYPE_FP32, device=1)
    t = Tensor.from_dlpack("OUT", src)
    assert src.streams == [0x5001]  # the producer orders its work before our stream...
    assert fake_driver.calls == [("proxy_stream", 1), ("sync_stream", 1, 0x5001)]  # ...waited
    assert not t.is_cpu()
    assert t.__dlpack_device__() == (KDL_CUDA, 1)
    assert t.shape() == [3, 4] and t.triton_dtype() == TYPE_FP32
    assert t._raw.ptr == host.ctypes.data and t._raw.nbytes == host.nbytes
    assert "gpu 1" in repr(t)


def test_with_the_legacy_hand_off_the_producer_gets_stream_1_and_it_is_waited_for(
    fake_driver, monkeypatch
):
    # PYBACKEND_DLPACK_STREAM=legacy: DLPack's 1, the legacy default stream (what torch's own
    # from_dlpack passes for its default stream); no proxy stream is made.
    monkeypatch.setattr(cuda_driver, "HANDOFF_LEGACY", True)
    host = np.arange(6, dtype=np.float32)
    src = FakeCudaArray(host, TYPE_FP32, device=1)
    t = Tensor.from_dlpack("OUT", src)
    assert src.streams == [cuda_driver.CU_STREAM_LEGACY] == [1]
    assert fake_driver.calls == [("sync_stream", 1, 1)]
    assert t._raw.ptr == host.ctypes.data


@pytest.mark.parametrize(
    "value, legacy",
    [(None, False), ("", False), ("proxy", False), ("1", False), ("legacy", True),
     (" Legacy ", True), ("LEGACY", True)],
)  # fmt: skip
def test_the_hand_off_switch_reads_legacy_in_any_case_and_defaults_to_the_proxy(value, legacy):
    assert cuda_driver.handoff_legacy(value) is legacy


def test_the_hand_off_switch_is_read_from_the_environment_at_import():
    import subprocess
    import sys

    code = "from pybackend.utils import cuda_driver as c; print(c.HANDOFF_LEGACY)"
    for value, want in (("legacy", "True"), ("proxy", "False"), (None, "False")):
        env = {k: v for k, v in os.environ.items() if k != cuda_driver.DLPACK_STREAM_ENV}
        if value is not None:
            env[cuda_driver.DLPACK_STREAM_ENV] = value
        out = subprocess.run(
            [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
        )
        assert out.stdout.strip() == want, (value, out.stderr)


def test_a_bare_capsule_waits_for_the_whole_device(fake_driver):
    host = np.zeros(5, dtype=np.int64)
    capsule, _ = fake_cuda_capsule(host, TYPE_INT64, device=0)
    t = Tensor.from_dlpack("X", capsule)
    assert fake_driver.calls == [("synchronize", 0)]
    assert not t.is_cpu()
    assert not ctypes.pythonapi.PyCapsule_IsValid(ctypes.py_object(capsule), b"dltensor")


def test_the_producer_lives_as_long_as_the_tensor(fake_driver):
    host = np.ones(4, dtype=np.float32)
    capsule, owner = fake_cuda_capsule(host, TYPE_FP32)
    t = Tensor.from_dlpack("X", capsule)
    del capsule
    gc.collect()
    assert owner() is not None  # the deleter has not run: the memory is still ours
    renamed = Tensor.from_dlpack("Y", t)
    del t
    gc.collect()
    assert owner() is not None  # the renamed tensor views the same memory
    del renamed
    gc.collect()
    assert owner() is None  # the last view died: the producer's deleter ran


def test_as_numpy_of_a_gpu_tensor_names_the_remedy(fake_driver):
    t = Tensor.from_dlpack("X", fake_cuda_capsule(np.ones(2, np.float32), TYPE_FP32)[0])
    with pytest.raises(TritonModelException) as e:
        t.as_numpy()
    assert str(e.value) == GPU_AS_NUMPY
    assert "Tensor is stored in GPU and cannot be converted to NumPy." in str(e.value)
    assert "from_dlpack" in str(e.value) and "FORCE_CPU_ONLY_INPUT_TENSORS" in str(e.value)


def test_non_contiguous_device_memory_is_refused_and_left_to_the_producer(fake_driver):
    host = np.zeros((2, 3), dtype=np.float32)
    capsule, owner = fake_cuda_capsule(host, TYPE_FP32)
    strides = (ctypes.c_int64 * 2)(1, 2)  # column-major
    dlpack.head(capsule).strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    with pytest.raises(TritonModelException, match="DLPack tensor is not contiguous"):
        Tensor.from_dlpack("X", capsule)
    assert dlpack.head(capsule)  # still an unconsumed 'dltensor' capsule


def test_c_order_strides_and_unit_dims_are_accepted(fake_driver):
    host = np.zeros((2, 1, 3), dtype=np.float32)
    capsule, _ = fake_cuda_capsule(host, TYPE_FP32)
    strides = (ctypes.c_int64 * 3)(3, 99, 1)  # a size-1 dim's stride does not matter
    dlpack.head(capsule).strides = ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64))
    assert Tensor.from_dlpack("X", capsule).shape() == [2, 1, 3]


def test_to_dlpack_of_a_gpu_tensor_is_zero_copy_and_keeps_the_tensor(fake_driver):
    host = np.arange(6, dtype=np.float32)
    capsule, owner = fake_cuda_capsule(host, TYPE_FP32, device=2)
    t = Tensor.from_dlpack("X", capsule)
    out = t.to_dlpack()
    del t
    gc.collect()
    assert owner() is not None  # the exported capsule keeps the tensor, and so the memory
    # A consumer (torch/cupy) takes it: same pointer, device and type.
    buf, code, shape = dlpack.take(out)
    assert (buf.ptr, buf.device_type, buf.device_id) == (host.ctypes.data, KDL_CUDA, 2)
    assert (code, shape) == (TYPE_FP32, (6,))
    del out, buf
    gc.collect()
    assert owner() is None


def test_exported_capsules_carry_c_order_strides(fake_driver):
    host = np.zeros((2, 3, 4), dtype=np.float32)
    t = Tensor.from_dlpack("X", fake_cuda_capsule(host, TYPE_FP32)[0])
    capsule = t.to_dlpack()
    dl = dlpack.head(capsule)
    assert [dl.strides[i] for i in range(3)] == [12, 4, 1]
    assert [dl.shape[i] for i in range(3)] == [2, 3, 4]
    assert (dl.device.device_type, dl.dtype.code, dl.dtype.bits) == (KDL_CUDA, 2, 32)
    del dl, capsule


def test_an_unconsumed_exported_capsule_releases_the_tensor(fake_driver):
    gc.collect()
    t = Tensor.from_dlpack("X", fake_cuda_capsule(np.ones(3, np.float32), TYPE_FP32)[0])
    before = dlpack.exported_count()  # the fake producer's capsule counts too
    cap = t.__dlpack__(stream=7)
    assert dlpack.exported_count() == before + 1
    del cap
    gc.collect()
    assert dlpack.exported_count() == before


def test_bf16_on_the_gpu_keeps_its_type(fake_driver):
    host = np.zeros(4, dtype=np.uint16)
    t = Tensor.from_dlpack("X", fake_cuda_capsule(host, TYPE_BF16)[0])
    assert t.triton_dtype() == TYPE_BF16 and not t.is_cpu()


def test_pinned_host_memory_is_cpu_data():
    host = np.arange(4, dtype=np.float32)
    capsule, _ = fake_cuda_capsule(host, TYPE_FP32, kind=KDL_CUDA_HOST)
    t = Tensor.from_dlpack("X", capsule)
    assert t.is_cpu()
    np.testing.assert_array_equal(t.as_numpy(), host)
    assert t.as_numpy().ctypes.data == host.ctypes.data  # zero-copy


def test_cpu_tensors_never_load_the_driver():
    old = cuda_driver.use_driver(None)
    try:
        t = Tensor.from_dlpack("X", np.arange(3))
        assert t.is_cpu() and t.__dlpack_device__() == (1, 0)
        np.from_dlpack(t)
        assert not cuda_driver.loaded()  # UV-28: no CUDA for a model that never meets a GPU
    finally:
        cuda_driver.use_driver(old)


def test_without_a_driver_a_gpu_tensor_fails_with_the_fix(monkeypatch):
    old = cuda_driver.use_driver(None)
    monkeypatch.setattr(cuda_driver, "LIBRARY", "libcuda-that-does-not-exist.so.1")
    try:
        src = FakeCudaArray(np.ones(2, np.float32), TYPE_FP32)
        with pytest.raises(cuda_driver.CudaError, match="NVIDIA driver library"):
            Tensor.from_dlpack("X", src)
    finally:
        cuda_driver.use_driver(old)


def test_unknown_device_types_are_refused():
    class Odd:
        def __dlpack_device__(self):
            return (14, 0)

        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

    with pytest.raises(TritonModelException, match="DLDevice type 14 is not support"):
        Tensor.from_dlpack("X", Odd())


def test_the_host_copy_is_what_a_client_receives(fake_driver):
    host = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = Tensor.from_dlpack("X", fake_cuda_capsule(host, TYPE_FP32, device=1)[0])
    got = t._host_copy()
    np.testing.assert_array_equal(got, host)
    assert got.ctypes.data != host.ctypes.data  # a copy, as the backend's device-to-host
    assert fake_driver.calls[-1] == ("copy_to_host", 1, 24)
    cpu = Tensor("Y", host)
    assert cpu._host_copy() is cpu.as_numpy()
