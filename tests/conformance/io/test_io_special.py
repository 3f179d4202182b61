"""BYTES outputs built from numpy 'S'/object arrays, BF16, optional inputs, batch dimension."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output

MODELS = ["bytes_forms", "bf16_identity", "optional_inputs", "batched_identity"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=MODELS) as srv:
        yield srv


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bytes_outputs_from_numpy_forms(server, protocol):
    result = infer(server, protocol, "bytes_forms", {"DUMMY": np.zeros(1, np.int32)})
    assert result.outputs["FROM_S"].tolist() == [b"ab", b"c", b""]
    assert result.outputs["FROM_OBJECT_MIXED"].tolist() == [
        "h\u00e9llo".encode(),
        b"12",
        b"1.5",
        b"\xff\x00",
    ]
    assert result.outputs["FROM_OBJECT_2D"].tolist() == [[b"a", b"bb", b"ccc"], [b"", b"e", b"f"]]
    assert result.outputs["EMPTY"].shape == (0,)
    assert set(result.datatypes.values()) == {"BYTES"}


# tritonclient (since r26.06) takes and returns BF16 as ml_dtypes.bfloat16 arrays.
BF16_VALUES = np.array([1.0, -2.5, 0.0, 3.0e38, -1.0e-3, np.nan], dtype=ml_dtypes.bfloat16)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_roundtrip_through_dlpack(server, protocol):
    """BF16 in, Tensor.from_dlpack(name, input_tensor) out: values survive bit-exactly."""
    result = infer(server, protocol, "bf16_identity", {"IN": (BF16_VALUES, "BF16")}, ["OUT"])
    assert result.datatypes["OUT"] == "BF16"
    got = result.outputs["OUT"]
    assert got.dtype == BF16_VALUES.dtype
    assert got.view(np.uint16).tolist() == BF16_VALUES.view(np.uint16).tolist()


@pytest.mark.deviation(
    "original raises on as_numpy() of BF16; ours returns ml_dtypes.bfloat16 when ml_dtypes "
    "is importable in the stub (UV-39)",
    backend="original",
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_as_numpy_raises_in_original(server, protocol):
    result = infer(server, protocol, "bf16_identity", {"IN": (BF16_VALUES, "BF16")}, ["AS_NUMPY"])
    assert text_output(result, "AS_NUMPY") == (
        "TritonModelException:Tensor dtype is BF16 and cannot be converted to NumPy. "
        "Use to_dlpack() and from_dlpack() instead."
    )


@pytest.mark.deviation("as_numpy() of BF16 gives ml_dtypes.bfloat16 (UV-39)")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_as_numpy_gives_ml_dtypes(server, protocol):
    result = infer(server, protocol, "bf16_identity", {"IN": (BF16_VALUES, "BF16")}, ["AS_NUMPY"])
    seen = text_output(result, "AS_NUMPY")
    # Either the ml_dtypes view, or a clear error that names the missing package.
    assert seen == "ok:bfloat16" or ("ml_dtypes" in seen and not seen.startswith("ok:"))


@pytest.mark.deviation("pb_utils.Tensor accepts an ml_dtypes.bfloat16 array (UV-39)")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bf16_tensor_from_ml_dtypes_array(server, protocol):
    result = infer(
        server, protocol, "bf16_identity", {"IN": (BF16_VALUES, "BF16")}, ["AS_NUMPY", "OUT_NUMPY"]
    )
    if text_output(result, "AS_NUMPY") != "ok:bfloat16":
        pytest.skip("ml_dtypes is not importable in the stub's environment")
    assert "OUT_NUMPY" in result.outputs, "the Tensor built from the bfloat16 array was dropped"
    got = result.outputs["OUT_NUMPY"]
    assert got.view(np.uint16).tolist() == BF16_VALUES.view(np.uint16).tolist()


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "sent,expected_sum",
    [
        (["A"], [1, 2]),
        (["A", "B"], [11, 22]),
        (["A", "C"], [101, 202]),
        (["A", "B", "C"], [111, 222]),
    ],
)
def test_optional_inputs(server, protocol, sent, expected_sum):
    """Missing optional inputs are absent from inputs(), not empty tensors."""
    values = {"A": [1, 2], "B": [10, 20], "C": [100, 200]}
    inputs = {name: np.array(values[name], np.int32) for name in sent}
    result = infer(server, protocol, "optional_inputs", inputs)
    assert sorted(n.decode() for n in result.outputs["NAMES"]) == sorted(sent)
    assert result.outputs["SUM"].tolist() == expected_sum


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_optional_input_order_follows_the_request(server, protocol):
    inputs = {name: np.array([1], np.int32) for name in ("C", "A", "B")}
    result = infer(server, protocol, "optional_inputs", inputs)
    assert [n.decode() for n in result.outputs["NAMES"]] == ["C", "A", "B"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("batch", [1, 3, 8])
def test_batch_dimension_is_part_of_the_shape(server, protocol, batch):
    data = np.arange(batch * 3, dtype=np.float32).reshape(batch, 3)
    result = infer(server, protocol, "batched_identity", {"IN": data})
    np.testing.assert_array_equal(result.outputs["OUT"], data)
    assert result.outputs["SHAPE"].tolist() == [[batch, 3]] * batch
