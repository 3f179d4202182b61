"""pb_utils.Tensor: construction rules, views, BYTES, DLPack."""

# ruff: noqa: E501 - exact upstream messages stay on one line so they can be grepped for

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from pybackend.utils.bytes_codec import serialize_to_bytes
from pybackend.utils.tensor import Tensor

NUMERIC = [
    (np.bool_, 1),
    (np.uint8, 2),
    (np.uint16, 3),
    (np.uint32, 4),
    (np.uint64, 5),
    (np.int8, 6),
    (np.int16, 7),
    (np.int32, 8),
    (np.int64, 9),
    (np.float16, 10),
    (np.float32, 11),
    (np.float64, 12),
]


@pytest.mark.parametrize(("np_type", "code"), NUMERIC)
def test_numeric_dtypes(np_type: type, code: int) -> None:
    arr = np.arange(6).reshape(2, 3).astype(np_type)
    t = pb_utils.Tensor("x", arr)
    assert t.name() == "x"
    assert t.shape() == [2, 3]
    assert t.triton_dtype() == code
    assert t.is_cpu()
    assert t.as_numpy() is arr


def test_bytes_and_object_arrays() -> None:
    arr = np.array([[b"a\x00", b""], ["x", b"\xff"]], dtype=object)
    t = pb_utils.Tensor("s", arr)
    assert t.triton_dtype() == 13 and t.shape() == [2, 2]
    assert t.as_numpy() is arr
    assert t._raw == serialize_to_bytes(arr)
    t2 = pb_utils.Tensor("b", np.array([b"ab", b"c"], dtype=np.bytes_))
    assert t2.triton_dtype() == 13


def test_construction_errors() -> None:
    with pytest.raises(
        pb_utils.TritonModelException, match="^Tensor name cannot be an empty string.$"
    ):
        pb_utils.Tensor("", np.zeros(1))
    with pytest.raises(pb_utils.TritonModelException, match="^NumPy dtype is not supported.$"):
        pb_utils.Tensor("u", np.array(["text"]))
    with pytest.raises(pb_utils.TritonModelException, match="NumPy dtype is not supported."):
        pb_utils.Tensor("c", np.zeros(2, np.complex64))
    with pytest.raises(TypeError):
        pb_utils.Tensor(name="x", array=np.zeros(1))  # type: ignore[call-arg]


def test_non_contiguous_and_big_endian_are_made_contiguous_little_endian() -> None:
    base = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = pb_utils.Tensor("t", base.T)
    assert t.as_numpy().flags.c_contiguous
    np.testing.assert_array_equal(t.as_numpy(), base.T)
    be = np.arange(3, dtype=">i4")
    t = pb_utils.Tensor("be", be)
    assert t.as_numpy().dtype == np.dtype("<i4")
    np.testing.assert_array_equal(t.as_numpy(), [0, 1, 2])


def test_lists_and_scalars_are_refused_like_pybind11() -> None:
    with pytest.raises(TypeError, match="numpy.ndarray"):
        pb_utils.Tensor("l", [1, 2, 3])
    with pytest.raises(TypeError):
        pb_utils.Tensor("s", np.float32(2))
    assert pb_utils.Tensor("s", np.array(2.0, np.float32)).shape() == []


def test_wire_tensor_is_a_writable_view() -> None:
    buf = np.zeros(16, np.uint8)
    t = Tensor._from_buffer("w", 11, (2, 2), buf)
    a = t.as_numpy()
    assert a.dtype == np.float32 and a.shape == (2, 2) and a.flags.writeable
    a[0, 0] = 1.0
    assert buf[:4].view(np.float32)[0] == 1.0
    with pytest.raises(pb_utils.TritonModelException, match="do not hold"):
        Tensor._from_buffer("w", 11, (3,), buf)


def test_wire_bytes_tensor_materialises_once() -> None:
    items = [b"a\x00b", b"", b"\xff"]
    arr = np.empty(3, dtype=object)
    arr[:] = items
    raw = np.frombuffer(serialize_to_bytes(arr), np.uint8)
    t = Tensor._from_buffer("b", 13, (3, 1), raw)
    out = t.as_numpy()
    assert out.shape == (3, 1) and out.dtype == np.object_
    assert out.ravel().tolist() == items
    assert t.as_numpy() is out
    bad = Tensor._from_buffer("b", 13, (4,), raw)
    with pytest.raises(ValueError):
        bad.as_numpy()


BF16_BITS = np.array([0x3F80, 0xC020, 0x0000, 0x7FC0], np.uint16)  # 1, -2.5, 0, nan


def bf16_input() -> Tensor:
    return Tensor._from_buffer("h", 14, (2, 2), BF16_BITS.view(np.uint8).copy())


def test_bf16_as_numpy_uses_ml_dtypes_or_names_it() -> None:
    t = bf16_input()
    try:
        import ml_dtypes
    except ImportError:
        with pytest.raises(pb_utils.TritonModelException) as e:
            t.as_numpy()
        assert str(e.value).startswith(
            "Tensor dtype is BF16 and cannot be converted to NumPy. Use to_dlpack() and from_dlpack() instead"
        )
        assert "ml_dtypes" in str(e.value)
        return
    arr = t.as_numpy()
    assert arr.dtype == ml_dtypes.bfloat16 and arr.shape == (2, 2)
    assert arr.view(np.uint16).ravel().tolist() == BF16_BITS.tolist()
    assert pb_utils.Tensor("x", arr).triton_dtype() == 14


def test_bf16_moves_through_dlpack_bit_exactly() -> None:
    t = bf16_input()
    capsule = t.to_dlpack()
    from pybackend.utils.tensor import _dl_tensor

    head = _dl_tensor(capsule)
    assert (head.dtype.code, head.dtype.bits, head.dtype.lanes) == (4, 16, 1)
    back = pb_utils.Tensor.from_dlpack("back", capsule)
    assert back.triton_dtype() == 14 and back.shape() == [2, 2]
    assert back._raw.view(np.uint16).ravel().tolist() == BF16_BITS.tolist()
    renamed = pb_utils.Tensor.from_dlpack("again", t)
    assert renamed.name() == "again" and renamed._raw is t._raw


def test_dlpack_round_trip_is_zero_copy() -> None:
    arr = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = pb_utils.Tensor("d", arr)
    assert t.__dlpack_device__() == (1, 0)
    back = np.from_dlpack(t)
    assert np.shares_memory(back, arr)
    t2 = pb_utils.Tensor.from_dlpack("d2", t.to_dlpack())
    assert np.shares_memory(t2.as_numpy(), arr)
    t3 = pb_utils.Tensor.from_dlpack("d3", arr)
    assert np.shares_memory(t3.as_numpy(), arr)
    assert t3.name() == "d3" and t3.triton_dtype() == 11


def test_dlpack_capsule_keeps_memory_alive() -> None:
    t = pb_utils.Tensor("k", np.arange(4, dtype=np.int64))
    ref = weakref.ref(t.as_numpy())
    capsule = t.to_dlpack()
    del t
    gc.collect()
    assert ref() is not None  # the capsule holds the array
    out = pb_utils.Tensor.from_dlpack("k2", capsule)
    del capsule
    gc.collect()
    np.testing.assert_array_equal(out.as_numpy(), [0, 1, 2, 3])


def test_dlpack_errors() -> None:
    s = pb_utils.Tensor("s", np.array([b"x"], dtype=object))
    with pytest.raises(
        pb_utils.TritonModelException, match="DLPack does not have support for string tensors."
    ):
        s.to_dlpack()
    with pytest.raises(pb_utils.TritonModelException, match="Tensor must be a DLPack capsule"):
        pb_utils.Tensor.from_dlpack("x", [1, 2])
    nc = np.arange(12, dtype=np.float32).reshape(3, 4).T
    with pytest.raises(pb_utils.TritonModelException, match="DLPack tensor is not contiguous"):
        pb_utils.Tensor.from_dlpack("x", nc)

    # GPU producers: tests/utils/test_pb_tensor_gpu.py
    class Odd:
        def __dlpack__(self, stream=None):
            raise AssertionError("not reached")

        def __dlpack_device__(self):
            return (7, 0)

    with pytest.raises(
        pb_utils.TritonModelException, match="DLDevice type 7 is not support by Python backend."
    ):
        pb_utils.Tensor.from_dlpack("o", Odd())
    used = np.arange(2).__dlpack__()
    pb_utils.Tensor.from_dlpack("u", used)
    with pytest.raises(pb_utils.TritonModelException, match="consumed"):
        pb_utils.Tensor.from_dlpack("u", used)


def test_read_only_arrays_export_a_copy_through_dlpack() -> None:
    ro = np.frombuffer(b"\x01\x02\x03\x04", np.uint8)
    t = pb_utils.Tensor("ro", ro)
    np.testing.assert_array_equal(np.from_dlpack(t), [1, 2, 3, 4])


def test_tensor_empty_outside_a_stub_is_process_memory() -> None:
    """Tensor.empty (UV-12): outside a model instance a plain writable array."""
    t = pb_utils.Tensor.empty("OUT", (2, 3), np.float32)
    assert t.name() == "OUT" and t.as_numpy().shape == (2, 3)
    assert t.as_numpy().dtype == np.float32 and t.as_numpy().flags.writeable
    assert pb_utils.Tensor.empty("N", 4, ">i4").as_numpy().dtype == np.dtype("<i4")
    assert pb_utils.Tensor.empty("Z", [0], np.uint8).as_numpy().shape == (0,)


@pytest.mark.parametrize("dtype", [object, np.bytes_, np.str_])
def test_tensor_empty_refuses_bytes(dtype: object) -> None:
    with pytest.raises(pb_utils.TritonModelException, match="cannot allocate a BYTES tensor"):
        pb_utils.Tensor.empty("OUT", (2,), dtype)


def test_tensor_empty_refuses_bad_arguments() -> None:
    with pytest.raises(pb_utils.TritonModelException, match="empty string"):
        pb_utils.Tensor.empty("", (2,), np.float32)
    with pytest.raises(pb_utils.TritonModelException, match="negative dimension"):
        pb_utils.Tensor.empty("OUT", (2, -1), np.float32)
    with pytest.raises(pb_utils.TritonModelException, match="not supported"):
        pb_utils.Tensor.empty("OUT", (2,), np.complex64)
