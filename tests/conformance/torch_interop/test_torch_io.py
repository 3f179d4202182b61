"""Tensors through torch on the CPU (models/torch_io): every datatype torch and Triton share,
in and out through DLPack both ways (a capsule from to_dlpack() and the tensor's own
__dlpack__), through numpy, an input's memory answered as an output, torch views and
tensors kept past their response, and non-contiguous torch tensors."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.stub_env import needs_torch

pytestmark = needs_torch()

MODEL = "torch_io"
NOT_CONTIGUOUS = (
    "TritonModelException: DLPack tensor is not contiguous. Only contiguous DLPack tensors "
    "that are stored in C-Order are supported."
)


def _ints(dtype: type) -> np.ndarray:
    info = np.iinfo(dtype)
    return np.array([info.min, info.min + 1, 0, 1, info.max - 1, info.max], dtype)


def _floats(dtype: type) -> np.ndarray:
    info = np.finfo(dtype)
    return np.array([-np.inf, -0.0, np.nan, info.smallest_subnormal, info.max, 1.5], dtype)


#: Six values per datatype (an even count: the non-contiguous views take it as rows of 2).
VALUES = {
    "BOOL": np.array([True, False, False, True, True, False]),
    "UINT8": _ints(np.uint8),
    "INT8": _ints(np.int8),
    "INT16": _ints(np.int16),
    "INT32": _ints(np.int32),
    "INT64": _ints(np.int64),
    "FP16": _floats(np.float16),
    "FP32": _floats(np.float32),
    "FP64": _floats(np.float64),
}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL]) as srv:
        yield srv


def ask(server, mode: str, values: dict[str, np.ndarray], protocol: str = "http"):
    inputs = {"MODE": bytes_input(mode), **{f"IN_{k}": v for k, v in values.items()}}
    return infer(server, protocol, MODEL, inputs)


def assert_outputs(result, expected: dict[str, np.ndarray]) -> None:
    """OUT_<TYPE> per datatype: the same datatype and the same bits (NaN, -0.0)."""
    assert result.datatypes == {f"OUT_{k}": k for k in expected}
    for kind, want in expected.items():
        got = result.outputs[f"OUT_{kind}"]
        assert got.dtype == want.dtype, kind
        bits = f"u{want.itemsize}" if want.dtype.kind == "f" else want.dtype
        assert np.array_equal(got.view(bits), want.view(bits)), (kind, got, want)


def flipped(values: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {k: v[::-1].copy() for k, v in values.items()}


@pytest.mark.parametrize(
    "mode, protocol",
    [("protocol", "http"), ("protocol", "grpc"), ("capsule", "http"), ("numpy_bridge", "http")],
)
def test_every_datatype_through_torch(server, mode: str, protocol: str):
    assert_outputs(ask(server, mode, VALUES, protocol), flipped(VALUES))


def test_an_inputs_memory_answers_as_an_output(server):
    assert_outputs(ask(server, "passthrough", VALUES), VALUES)


def test_torch_views_and_tensors_outlive_their_response(server):
    first = {k: VALUES[k] for k in ("BOOL", "INT64", "FP16")}
    assert_outputs(ask(server, "keep", first), flipped(first))
    # Requests with other values in between: the kept views still read the first inputs.
    other = {"INT64": VALUES["INT64"][::-1].copy()}
    assert_outputs(ask(server, "protocol", other), flipped(other))
    assert_outputs(ask(server, "kept", {}), first)
    assert_outputs(ask(server, "kept_answers", {}), flipped(first))


def test_a_transposed_tensor_is_refused(server):
    result = ask(server, "transposed", {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert text_output(result, "TEXT") == NOT_CONTIGUOUS
    assert "OUT_INT64" not in result.outputs


def test_a_column_is_contiguous_whatever_its_size_1_stride(server):
    # torch exports strides (1, 6) for this (6, 1) view: a size-1 dimension's stride is free.
    result = ask(server, "column", {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert text_output(result, "TEXT") == "taken"
    assert result.outputs["OUT_INT64"].tolist() == [1, 2, 3, 4, 5, 6]


# What the views hold: [1..6][::2] and every second row of [1..6] as rows of 2.
VIEWS = {"strided": [1, 3, 5], "rows": [1, 2, 5, 6]}


@pytest.mark.deviation("ours refuses a non-contiguous DLPack tensor instead of misreading it")
@pytest.mark.parametrize("mode", sorted(VIEWS))
def test_other_non_contiguous_views_are_refused_on_ours(server, mode: str):
    result = ask(server, mode, {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert text_output(result, "TEXT") == NOT_CONTIGUOUS


@pytest.mark.deviation(
    "the original checks every stride but the outermost: it takes these views and reads "
    "their memory as if contiguous",
    backend="original",
)
@pytest.mark.parametrize("mode", sorted(VIEWS))
def test_other_non_contiguous_views_read_wrong_data_on_the_original(server, mode: str):
    result = ask(server, mode, {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert text_output(result, "TEXT") == "taken"
    got = result.outputs["OUT_INT64"].tolist()
    assert got != VIEWS[mode]
    assert got == list(range(1, len(VIEWS[mode]) + 1))  # the start of the memory


@pytest.mark.deviation(
    "ours: an input's DLPack export and as_numpy() are the same memory, so an in-place torch "
    "op on the view shows in a later as_numpy()"
)
@pytest.mark.parametrize("mode", ["add_capsule", "add_protocol"])
def test_an_in_place_torch_op_shows_in_as_numpy_on_ours(server, mode: str):
    result = ask(server, mode, {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert result.outputs["OUT_INT64"].tolist() == [2, 3, 4, 5, 6, 7]


@pytest.mark.deviation(
    "the original's DLPack export of an input is a copy: as_numpy() keeps the values",
    backend="original",
)
@pytest.mark.parametrize("mode", ["add_capsule", "add_protocol"])
def test_an_in_place_torch_op_does_not_show_on_the_original(server, mode: str):
    result = ask(server, mode, {"INT64": np.arange(1, 7, dtype=np.int64)})
    assert result.outputs["OUT_INT64"].tolist() == [1, 2, 3, 4, 5, 6]
