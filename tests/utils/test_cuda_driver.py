"""pybackend/utils/cuda_driver.py against a fake libcuda (Python functions standing for the
C entry points): the marshalling of every argument we can check without a GPU (IPC handles
with NUL bytes, pointers, sizes), contexts pushed and popped around each call, and error
texts naming the call, the driver's error name and the fix. tests/gpu/ runs the real one."""

from __future__ import annotations

import ctypes
from typing import Any, Dict, List

import pytest

from pybackend.utils import cuda_driver
from pybackend.utils.cuda_driver import CudaError, Driver

HANDLE = b"\x00\x01handle\x00with NULs" + bytes(range(46))
assert len(HANDLE) == 64
BASE = 0x7F0000000000


def _out(ref: Any) -> Any:
    return ref._obj  # the object ctypes.byref() points at


class FakeLib:
    """What the driver calls, recorded; ``fail`` maps a function name to a CUresult."""

    def __init__(self) -> None:
        self.calls: List[tuple] = []
        self.fail: Dict[str, int] = {}
        self.current: List[int] = []

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("cu"):
            raise AttributeError(name)
        impl = getattr(type(self), "_" + name, None)
        impl = impl.__get__(self) if impl is not None else None

        def call(*args: Any) -> int:
            self.calls.append((name, args))
            if name in self.fail:
                return self.fail[name]
            return impl(*args) if impl is not None else 0

        call.argtypes = None  # type: ignore[attr-defined]
        call.restype = None  # type: ignore[attr-defined]
        object.__setattr__(self, name, call)
        return call

    def _cuGetErrorName(self, rc: int, name: Any) -> int:
        _out(name).value = {1: b"CUDA_ERROR_INVALID_VALUE", 801: b"CUDA_ERROR_NOT_SUPPORTED"}[rc]
        return 0

    def _cuDevicePrimaryCtxRetain(self, ctx: Any, dev: int) -> int:
        _out(ctx).value = 0x1000 + dev
        return 0

    def _cuDeviceGet(self, dev: Any, ordinal: int) -> int:
        _out(dev).value = ordinal
        return 0

    def _cuCtxPushCurrent_v2(self, ctx: Any) -> int:
        self.current.append(ctx.value)
        return 0

    def _cuCtxPopCurrent_v2(self, ctx: Any) -> int:
        self.current.pop()
        return 0

    def _cuMemGetAddressRange_v2(self, base: Any, size: Any, ptr: int) -> int:
        _out(base).value = BASE
        _out(size).value = 1 << 20
        return 0

    def _cuIpcGetMemHandle(self, handle: Any, base: int) -> int:
        assert base == BASE
        ctypes.memmove(ctypes.addressof(_out(handle)), HANDLE, 64)
        return 0

    def _cuIpcOpenMemHandle_v2(self, ptr: Any, handle: Any, flags: int) -> int:
        assert bytes(handle) == HANDLE and flags == 1  # by value, every byte, lazy peer access
        _out(ptr).value = 0x5000
        return 0


@pytest.fixture()
def lib() -> FakeLib:
    return FakeLib()


def test_ipc_handles_keep_every_byte_and_the_offset(lib: FakeLib) -> None:
    d = Driver(lib)
    assert d.address_range(1, BASE + 4096) == (BASE, 1 << 20)
    handle = d.ipc_handle(1, BASE)
    assert handle == HANDLE
    assert d.open_ipc(1, handle) == 0x5000
    assert lib.current == []  # every push was popped
    pushes = [args[0].value for name, args in lib.calls if name == "cuCtxPushCurrent_v2"]
    assert set(pushes) == {0x1001}  # device 1's primary context


def test_a_failed_call_names_the_call_the_error_and_the_fix(lib: FakeLib) -> None:
    d = Driver(lib)
    lib.fail["cuIpcOpenMemHandle_v2"] = 801
    with pytest.raises(CudaError) as e:
        d.open_ipc(0, HANDLE)
    assert e.value.call == "cuIpcOpenMemHandle" and e.value.name == "CUDA_ERROR_NOT_SUPPORTED"
    text = str(e.value)
    assert "cuIpcOpenMemHandle failed with CUDA_ERROR_NOT_SUPPORTED" in text
    assert "FORCE_CPU_ONLY_INPUT_TENSORS" in text
    assert lib.current == []  # popped on the way out too


def test_cuinit_failure_is_a_clear_error(lib: FakeLib) -> None:
    lib.fail["cuInit"] = 1
    with pytest.raises(CudaError, match="cuInit failed with CUDA_ERROR_INVALID_VALUE"):
        Driver(lib)


def test_the_proxy_stream_is_made_once_per_device(lib: FakeLib) -> None:
    d = Driver(lib)
    a = d.proxy_stream(0)
    assert d.proxy_stream(0) == a
    assert [n for n, _ in lib.calls].count("cuStreamCreate") == 1


def test_device_numbering_when_isolated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(cuda_driver.ISOLATED_DEVICE_ENV, raising=False)
    assert (cuda_driver.to_global(2), cuda_driver.to_local(2)) == (2, 2)
    monkeypatch.setenv(cuda_driver.ISOLATED_DEVICE_ENV, "3")
    assert (cuda_driver.to_global(0), cuda_driver.to_local(3)) == (3, 0)


def test_a_driver_without_a_function_we_call_is_a_clear_error(lib: FakeLib) -> None:
    class Old(FakeLib):
        def __getattr__(self, name: str) -> Any:
            if name == "cuIpcOpenMemHandle_v2":
                raise AttributeError(name)
            return super().__getattr__(name)

    with pytest.raises(CudaError, match="lacks cuIpcOpenMemHandle_v2: update the NVIDIA driver"):
        Driver(Old())
