"""BYTES serialization: NULs, empty strings, non-UTF-8, shapes, malformed data."""

from __future__ import annotations

import struct
import types

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import triton_python_backend_utils as pb_utils
from pybackend.utils import native
from pybackend.utils.bytes_codec import split_bytes, to_object_array


@pytest.fixture(params=["native", "python"])
def decoder_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Large tensors decode through the C helpers (libpybackend_native.so) when present
    and through numpy runs otherwise: every large-tensor test runs on both."""
    if request.param == "native":
        if native.helpers is None:
            pytest.fail(f"{native.LIBRARY} was not built (make build builds it)")
    else:
        monkeypatch.setattr(native, "helpers", None)
    return request.param


def reference_serialize(items: list) -> bytes:
    return b"".join(struct.pack("<I", len(b)) + b for b in items)


def test_object_array_elements() -> None:
    arr = np.array([b"ab", b"", b"\x00x\x00", "hé", 5, 2.5, None], dtype=object)
    out = pb_utils.serialize_byte_tensor(arr)
    assert isinstance(out, bytes)
    expected = [b"ab", b"", b"\x00x\x00", "hé".encode(), b"5", b"2.5", b"None"]
    assert out == reference_serialize(expected)
    back = pb_utils.deserialize_bytes_tensor(out)
    assert back.dtype == np.object_ and back.shape == (7,)
    assert back.tolist() == expected


def test_c_order_of_multi_dim_and_non_contiguous() -> None:
    arr = np.array([[b"a", b"b"], [b"c", b"d"]], dtype=object)
    assert pb_utils.serialize_byte_tensor(arr.T) == reference_serialize([b"a", b"c", b"b", b"d"])


def test_bytes_dtype_strips_trailing_nuls_like_numpy() -> None:
    arr = np.array([b"ab\x00", b"\x00c", b""], dtype=np.bytes_)
    assert pb_utils.serialize_byte_tensor(arr) == reference_serialize([b"ab", b"\x00c", b""])


def test_empty_and_other_dtypes() -> None:
    assert pb_utils.serialize_byte_tensor(np.zeros((0,), dtype=object)) == ()
    assert pb_utils.serialize_byte_tensor(np.zeros((2, 0), dtype=np.bytes_)) == ()
    assert pb_utils.serialize_byte_tensor(np.zeros(3, np.float32)) is None
    assert pb_utils.serialize_byte_tensor(np.array(["x"])) is None
    assert pb_utils.deserialize_bytes_tensor(b"").shape == (0,)


def test_large_random_round_trip(decoder_path: str) -> None:
    rng = np.random.default_rng(0)
    items = [rng.bytes(int(n)) for n in rng.integers(0, 50, size=2000)]
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    data = pb_utils.serialize_byte_tensor(arr)
    assert data == reference_serialize(items)
    assert pb_utils.deserialize_bytes_tensor(data).tolist() == items
    assert pb_utils.deserialize_bytes_tensor(bytearray(data)).tolist() == items
    assert pb_utils.deserialize_bytes_tensor(np.frombuffer(data, np.uint8)).tolist() == items


def test_malformed_data() -> None:
    with pytest.raises(ValueError, match="incomplete length field"):
        pb_utils.deserialize_bytes_tensor(b"\x01\x00")
    with pytest.raises(struct.error, match="string extends beyond buffer"):
        pb_utils.deserialize_bytes_tensor(b"\x05\x00\x00\x00abc")
    with pytest.raises(ValueError, match="expected 3 elements, found 1"):
        split_bytes(reference_serialize([b"x"]), 3)


@pytest.mark.parametrize(
    "pattern",
    [
        "uniform",
        "uniform_nul",
        "empty_runs",
        "runs_then_noise",
        "noise_then_runs",
        "mixed_trailing_nul",
    ],
)
def test_equal_length_runs_decode_exactly(pattern: str, decoder_path: str) -> None:
    """The decoder takes runs of equal-length elements as one numpy block (UV-11): every
    run boundary, trailing NULs and empty strings must still come back exactly."""
    rng = np.random.default_rng(7)
    if pattern == "uniform":
        items = [f"s{i:06d}-abcdefgh".encode() for i in range(5000)]
    elif pattern == "uniform_nul":
        items = [b"\x00" * 3 + bytes([i % 256]) + b"\x00" * 4 for i in range(700)]
    elif pattern == "empty_runs":
        items = [b""] * 300 + [b"x"] * 9 + [b""] * 64 + [b"yz"] * 7
    elif pattern == "mixed_trailing_nul":  # the padded matrix strips these: put back
        items = [b"ab\x00", b"c", b"\x00", b"de\x00\x00", b"", b"\x00f"] * 300
    elif pattern == "runs_then_noise":
        items = [b"abcd"] * 1000 + [rng.bytes(int(n)) for n in rng.integers(0, 9, 500)]
    else:
        items = [rng.bytes(int(n)) for n in rng.integers(0, 9, 500)] + [b"\x00q"] * 2000
    data = reference_serialize(items)
    out = pb_utils.deserialize_bytes_tensor(data)
    assert out.dtype == np.object_ and out.shape == (len(items),)
    assert out.tolist() == items
    assert all(type(x) is bytes for x in out)
    tensor = pb_utils.Tensor("T", np.array(items, dtype=object)).as_numpy()
    assert tensor.tolist() == items


@pytest.mark.parametrize("count", [1, 63, 64, 65, 500])
@pytest.mark.parametrize("form", ["uniform_nul", "mixed"])
def test_serialize_small_uniform_and_mixed_paths(count: int, form: str) -> None:
    """serialize takes a join for few elements, one matrix for equal lengths and the
    vectorised path otherwise: each must give the reference bytes."""
    if form == "uniform_nul":
        items = [bytes([i % 256, 0, 0]) for i in range(count)]  # trailing NULs kept
    else:
        items = [b"x" * (i % 5) for i in range(count)]
    arr = np.empty(count, dtype=object)
    arr[:] = items
    assert pb_utils.serialize_byte_tensor(arr) == reference_serialize(items)


def reference_decode(data: bytes) -> list:
    """The format's definition as a plain loop (None where the data is malformed)."""
    items, pos = [], 0
    while pos < len(data):
        if pos + 4 > len(data):
            return None
        (n,) = struct.unpack_from("<I", data, pos)
        if pos + 4 + n > len(data):
            return None
        items.append(data[pos + 4 : pos + 4 + n])
        pos += 4 + n
    return items


@given(st.lists(st.binary(max_size=12), max_size=70), st.booleans())
@settings(max_examples=400, deadline=None)
def test_round_trip_of_any_small_tensor(items: list, same_width: bool) -> None:
    """Small tensors take a shortcut in both directions (a join with one shared header
    when every element is equally long, slices checked by re-serializing): whatever the
    elements, both must agree with the format's definition."""
    if same_width and items:
        items = [(x + b"\x00" * 12)[:4] for x in items]  # equal length, NULs kept
    arr = np.empty(len(items), dtype=object)
    arr[:] = items
    data = pb_utils.serialize_byte_tensor(arr) if items else b""
    assert data == reference_serialize(items)
    assert split_bytes(data, len(items)) == items
    assert pb_utils.deserialize_bytes_tensor(data).tolist() == items


@given(st.binary(max_size=200))
@settings(max_examples=400, deadline=None)
def test_any_bytes_decode_like_the_definition(data: bytes) -> None:
    """Arbitrary input, mostly malformed: the decoder returns exactly the definition's
    elements or raises the struct error the original raised, never something else."""
    expected = reference_decode(data)
    if expected is None:
        with pytest.raises(struct.error, match="Invalid bytes tensor data"):
            pb_utils.deserialize_bytes_tensor(data)
    else:
        assert pb_utils.deserialize_bytes_tensor(data).tolist() == expected


def test_small_path_checks_its_equal_width_guess() -> None:
    """Element lengths whose total happens to divide evenly by the first element's stride
    must not be cut as if all were equally long."""
    items = [b"ab", b"abcdefgh"]  # first stride 6, total 6 + 12 = 18: three "elements"?
    data = reference_serialize(items)
    assert len(data) % 6 == 0
    assert split_bytes(data, 2) == items
    assert pb_utils.deserialize_bytes_tensor(data).tolist() == items
    with pytest.raises(ValueError, match="expected 3 elements, found 2"):
        split_bytes(data, 3)


@given(
    st.lists(st.binary(max_size=40), min_size=33, max_size=400),
    st.sampled_from(["as_is", "trailing_nuls", "one_long"]),
)
@settings(max_examples=150, deadline=None)
def test_large_tensors_of_any_lengths(items: list, shape: str) -> None:
    if shape == "trailing_nuls":
        items = [x + b"\x00" for x in items]
    elif shape == "one_long":
        items = [*items, b"z" * 100_000]  # no padded matrix for this one
    data = reference_serialize(items)
    saved = native.helpers
    for helpers in (saved, None):  # hypothesis and function fixtures do not mix: by hand
        native.helpers = helpers
        try:
            assert split_bytes(data, len(items)) == items
            # Serialized through the padded matrix, or the join ("one_long"), or numpy.
            assert pb_utils.serialize_byte_tensor(to_object_array(items)) == data
            out = pb_utils.deserialize_bytes_tensor(bytearray(data))
            assert out.tolist() == items and all(type(x) is bytes for x in out)
        finally:
            native.helpers = saved


def test_large_tensor_errors_name_the_problem(decoder_path: str) -> None:
    items = [b"abc", b"", b"de\x00"] * 100
    data = reference_serialize(items)
    with pytest.raises(ValueError, match="expected 299 elements, found 300"):
        split_bytes(data, 299)
    with pytest.raises(ValueError, match="expected 301 elements, found 300"):
        split_bytes(data, 301)
    with pytest.raises(struct.error, match="string extends beyond buffer"):
        split_bytes(data + b"\x09\x00\x00\x00abc", 300)  # malformed after `count` elements
    with pytest.raises(ValueError, match="incomplete length field"):
        pb_utils.deserialize_bytes_tensor(data + b"\x01")
    assert split_bytes(reference_serialize([b""] * 400), 400) == [b""] * 400


def test_native_library_is_built_and_loaded() -> None:
    """The build must ship the helpers (their absence only slows decoding down, so nothing
    else would notice)."""
    assert native.LIBRARY.is_file()
    assert native.helpers is not None


def test_a_library_older_than_the_code_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkout whose library was built before a helper was added (pb_bytes_pack): the
    stub takes the Python paths instead of failing at import."""

    class Older:
        def __getattr__(self, name: str) -> object:
            if name == "pb_bytes_pack":
                raise AttributeError(name)
            return types.SimpleNamespace()

    monkeypatch.setattr(native.ctypes, "CDLL", lambda path: Older())
    assert native._load() is None
