"""Every datatype of spec section 8, both directions, over HTTP and gRPC (model identity_all)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output

FLOATS = [np.nan, np.inf, -np.inf, -0.0, 1.5, 65504.0]


def sample(type_name: str, shape: tuple[int, ...]) -> np.ndarray:
    """Values at the edges of each type so truncation or byte-order mistakes show."""
    count = int(np.prod(shape))
    if type_name == "BOOL":
        values = np.array([True, False, True, True, False, False] * 2, dtype=bool)
    elif type_name == "STRING":
        pool = [b"", b"a\x00b", b"\xff\xfe", b"tail\x00", "h\u00e9llo".encode(), b"x" * 300]
        values = np.array(pool * 2, dtype=object)
    elif type_name.startswith("FP"):
        dtype = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}[type_name]
        values = np.array(FLOATS * 2, dtype=dtype)
    else:
        dtype = np.dtype(type_name.lower())
        info = np.iinfo(dtype)
        values = np.array([info.min, info.max, 0, 1, info.max - 1, info.min + 1] * 2, dtype=dtype)
    return values[:count].reshape(shape)


TYPES = {
    # type name -> numpy dtype.str the model must see from as_numpy()
    "BOOL": "|b1",
    "UINT8": "|u1",
    "UINT16": "<u2",
    "UINT32": "<u4",
    "UINT64": "<u8",
    "INT8": "|i1",
    "INT16": "<i2",
    "INT32": "<i4",
    "INT64": "<i8",
    "FP16": "<f2",
    "FP32": "<f4",
    "FP64": "<f8",
    "STRING": "|O",
}
SHAPES = [(2, 3), (1, 1), (4, 1), (0, 3), (3, 0)]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(
        model_control_mode="explicit", load_models=["identity_all"]
    ) as srv:
        yield srv


def assert_same(expected: np.ndarray, got: np.ndarray) -> None:
    assert got.shape == expected.shape
    if expected.dtype == object:
        assert got.dtype == object
        assert got.tolist() == expected.tolist()
    elif expected.dtype.kind == "f":
        # Bitwise: NaN, -0.0 and infinities must survive unchanged.
        assert got.dtype == expected.dtype
        bits = f"u{expected.dtype.itemsize}"
        assert np.array_equal(got.view(bits), expected.view(bits))
    else:
        assert got.dtype == expected.dtype
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("type_name", list(TYPES))
def test_identity_roundtrip(server, protocol, type_name, shape):
    data = sample(type_name, shape)
    result = infer(
        server, protocol, "identity_all", {f"IN_{type_name}": data}, [f"OUT_{type_name}", "INFO"]
    )
    datatype = "BYTES" if type_name == "STRING" else type_name
    assert result.datatypes[f"OUT_{type_name}"] == datatype
    assert_same(data, result.outputs[f"OUT_{type_name}"])
    (info,) = json.loads(text_output(result, "INFO"))
    assert info["name"] == f"IN_{type_name}"
    assert info["shape"] == list(shape)
    assert info["numpy_shape"] == list(shape)
    assert info["numpy_dtype"] == TYPES[type_name]
    assert info["is_cpu"] is True
    assert info["c_contiguous"] is True
    if type_name == "STRING" and data.size:
        assert info["element_types"] == ["bytes"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("type_name", ["FP32", "INT64", "BOOL", "UINT8"])
def test_input_view_is_writeable(server, protocol, type_name):
    """Spec 10.4: as_numpy() of a CPU input is a zero-copy, writable view."""
    result = infer(
        server, protocol, "identity_all", {f"IN_{type_name}": sample(type_name, (2, 2))}, ["INFO"]
    )
    (info,) = json.loads(text_output(result, "INFO"))
    assert info["writeable"] is True


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "name,shape",
    [("STRING_R1", (5,)), ("STRING_R3", (2, 2, 3)), ("STRING_SCALAR", (1,)), ("FP32_SCALAR", (1,))],
)
def test_other_ranks(server, protocol, name, shape):
    """BYTES of rank 1 and 3, and the scalar-like dims [1] (rank 0 is refused by Triton)."""
    data = sample("FP32" if name.startswith("FP32") else "STRING", shape)
    result = infer(server, protocol, "identity_all", {f"IN_{name}": data}, [f"OUT_{name}", "INFO"])
    assert_same(data, result.outputs[f"OUT_{name}"])
    (info,) = json.loads(text_output(result, "INFO"))
    assert info["shape"] == list(shape)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_several_datatypes_in_one_request(server, protocol):
    """Inputs arrive in one list and each keeps its own datatype."""
    inputs = {f"IN_{t}": sample(t, (2, 3)) for t in ("FP16", "STRING", "BOOL", "UINT64")}
    outputs = [f"OUT_{t}" for t in ("FP16", "STRING", "BOOL", "UINT64")]
    result = infer(server, protocol, "identity_all", inputs, outputs + ["INFO"])
    for name, data in inputs.items():
        assert_same(data, result.outputs["OUT" + name[2:]])
    seen = sorted(entry["name"] for entry in json.loads(text_output(result, "INFO")))
    assert seen == sorted(inputs)
