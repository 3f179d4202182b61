"""Tensor corner cases real model.py files hit, seen by the client and inside the model
(models/tensor_corners): outputs from numpy views (Fortran order, steps, negative strides,
broadcasts, read-only), 0-d and zero-size arrays, BYTES from 'S' and object arrays (NULs,
str, None, numpy scalars, 1 MiB and 20,000 elements), platform integer types, DLPack with
numpy and torch on the CPU, outputs of one name twice or of a name not in the config."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error, text_output
from conformance_support.stub_env import needs_torch

MODEL = "tensor_corners"
NOT_CONTIGUOUS = (
    "TritonModelException:DLPack tensor is not contiguous. Only contiguous DLPack tensors "
    "that are stored in C-Order are supported."
)
UNSUPPORTED = "TritonModelException:NumPy dtype is not supported."

# out:<case> -> (datatype, the array the client decodes); the same on both backends.
OUTPUTS = {
    "fortran": ("FP32", np.arange(6, dtype=np.float32).reshape(2, 3)),
    "step_slice": ("INT32", np.array([0, 3, 6, 9], np.int32)),
    "negative_stride": ("INT64", np.array([4, 3, 2, 1, 0], np.int64)),
    "column": ("FP32", np.array([1.0, 4.0], np.float32)),
    "readonly": ("FP64", np.array([0.0, 1.0, 2.0])),
    "broadcast": ("INT16", np.array([[0, 1, 2], [0, 1, 2]], np.int16)),
    "zero_dim_float": ("FP32", np.zeros((2, 0), np.float32)),
    "zero_dim_bytes": ("BYTES", np.empty((2, 0), np.object_)),
    "bool_strided": ("BOOL", np.array([True, True, False])),
    "bool_0d": ("BOOL", np.array(True)),
    "fp16_transposed": ("FP16", np.arange(6, dtype=np.float16).reshape(2, 3).T),
    "object_transposed": ("BYTES", np.array([[b"a", b"ccc"], [b"bb", b""]], np.object_)),
    "S_transposed": ("BYTES", np.array([[b"a", b"ccc"], [b"bb", b""]], np.object_)),
    # numpy 'S' keeps inner NULs and drops trailing ones.
    "S_inner_nul": ("BYTES", np.array([b"a\x00b", b"", b"\x00\x00z"], np.object_)),
    "object_nul": ("BYTES", np.array([b"\x00", b"a\x00", b"", b"\x00\x00"], np.object_)),
    "object_str": ("BYTES", np.array(["h\u00e9llo".encode(), b"", "\u2713".encode()], np.object_)),
    "object_none": ("BYTES", np.array([b"None", b"x"], np.object_)),
    # Only exactly-bytes elements pass as they are: np.bytes_ (what an 'S' array's element
    # is) and bytearray are sent as str(x), as upstream's serialize_byte_tensor does.
    "object_np_bytes": ("BYTES", np.array([b"b'ab'", b"cd", b"bytearray(b'ef')"], np.object_)),
    "object_long": ("BYTES", np.array([b"x" * (1 << 20), b"y"], np.object_)),
    "object_many": ("BYTES", np.array([b"%d" % i for i in range(20000)], np.object_)),
    "object_0d": ("BYTES", np.array(b"solo", np.object_)),
    "matrix": ("INT32", np.array([[1, 2], [3, 4]], np.int32)),
    "record": ("INT32", np.array([1, 2], np.int32)),
    "intc": ("INT32", np.array([7, -7], np.int32)),
    "longlong": ("INT64", np.array([7, -7], np.int64)),
    "uint": ("UINT64", np.array([7, 8], np.uint64)),
    # A Tensor keeps its numeric array until the response is sent: a change made to the
    # array after Tensor(...) goes out; BYTES are serialized at once and a copied
    # (non-contiguous) array is no longer the model's.
    "mutated_after": ("FP32", np.full(3, 7.0, np.float32)),
    "mutated_after_bytes": ("BYTES", np.array([b"a", b"b"], np.object_)),
    "mutated_after_transposed": ("INT8", np.zeros((2, 3), np.int8)),
    "written_through_as_numpy": ("INT32", np.array([42, 0], np.int32)),
}

# case:<name> -> RESULT; the same on both backends.
CASES = {
    "fortran_view": "ok:[[2, 3], '<f4', True, [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]",
    "fortran_same_object": "ok:False",  # copied to C order
    "matrix_as_numpy": "ok:'matrix'",
    "c_same_object": "ok:True",
    "readonly_same_object": "ok:True",
    "readonly_writeable": "ok:False",
    "step_view": "ok:[[4], '<i4', True, [0, 3, 6, 9]]",
    "zero_d_view": "ok:[[], '<i4', True, 5]",
    "zero_dim_view": "ok:[[2, 0], '<f4', True, [[], []]]",
    "broadcast_view": "ok:[[2, 2], '|u1', True, [[0, 1], [0, 1]]]",
    "object_str_view": "ok:[[2], '|O', True, ['a', 'b\u00e9']]",  # unserialized until sent
    "S_view": "ok:[[2], '|S2', True, [b'a', b'bc']]",
    "object_0d_view": "ok:[[], '|O', True, b'solo']",
    "dtype_complex": UNSUPPORTED,
    "dtype_datetime": UNSUPPORTED,
    "dtype_void": UNSUPPORTED,
    "dtype_longdouble": UNSUPPORTED,
    "dlpack_fortran": NOT_CONTIGUOUS,
    "dlpack_empty_name": "TritonModelException:Tensor name cannot be an empty string.",
    "dlpack_of_bytes_tensor": "TritonModelException:DLPack does not have support for string "
    "tensors.",
    "np_from_tensor": "ok:['<i2', [3], [0, 1, 2]]",
    "np_from_tensor_bool": "ok:['|b1', [2], [True, False]]",
    "np_from_tensor_empty": "ok:['<f4', [0, 2], []]",
    "np_from_tensor_0d": "ok:['<i8', [], 3]",
    "np_from_tensor_transposed": "ok:['<f4', [3, 2], [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]]",
    "np_from_tensor_bytes": "TritonModelException:DLPack does not have support for string tensors.",
    "to_dlpack_twice": "ok:['PyCapsule', 'PyCapsule']",
    # pb_utils' BYTES helpers follow the same element rule as Tensor.
    "serialize_np_bytes": "ok:b\"\\x05\\x00\\x00\\x00b'ab'\\x01\\x00\\x00\\x00c\"",
    "serialize_0d": "ok:b'\\x04\\x00\\x00\\x00solo'",
    "serialize_S_transposed": "ok:b'\\x01\\x00\\x00\\x00a\\x01\\x00\\x00\\x00c\\x02\\x00"
    "\\x00\\x00bb\\x01\\x00\\x00\\x00d'",
    "serialize_numbers": "ok:None",
    "deserialize_empty": "ok:[]",
    "deserialize_nul": "ok:[b'\\x00', b'']",
}

BLS_ERROR = "ok:'error:Model identity_all - Error when running inference: "
# bls:<case> -> RESULT: a BLS request to identity_all with an input made from such arrays.
BLS = {
    "fortran": "ok:[['OUT_FP32', '<f4', [2, 3], [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]]]",
    "transposed": "ok:[['OUT_INT8', '|i1', [3, 2], [[0, 3], [1, 4], [2, 5]]]]",
    "zero_dim_bytes": "ok:[['OUT_STRING', '|O', [2, 0], [[], []]]]",
    "np_bytes": "ok:[['OUT_STRING', '|O', [1, 2], [[b\"b'ab'\", b'c']]]]",
    "S_array": "ok:[['OUT_STRING', '|O', [1, 2], [[b'a\\x00b', b'cd']]]]",
    "object_str": "ok:[['OUT_STRING', '|O', [1, 2], [[b'h\\xc3\\xa9', b'5']]]]",
    "zero_d": BLS_ERROR.replace("'", '"') + "[request id: <id_unknown>] unexpected shape for "
    "input 'IN_FP32_SCALAR' for model 'identity_all'. Expected [1], got []. \"",
    "wrong_rank": BLS_ERROR.replace("'", '"') + "[request id: <id_unknown>] unexpected shape "
    "for input 'IN_FP32' for model 'identity_all'. Expected [-1,-1], got [3]. \"",
    "wrong_dtype": BLS_ERROR.replace("'", '"') + "[request id: <id_unknown>] inference input "
    "'IN_FP32' data-type is 'INT64', but model 'identity_all' expects 'FP32'\"",
    "unknown_input": BLS_ERROR.replace("'", '"') + "unexpected inference input "
    "'NOT_AN_INPUT' for model 'identity_all'\"",
}

TORCH_CASES = {
    # The producer's own exception reaches the model unchanged.
    "torch_requires_grad": "BufferError:Can't export tensors that require gradient, use "
    "tensor.detach()",
    "torch_bool": "ok:[[3], '|b1', [True, False, True]]",
    "torch_zero_size": "ok:[[0, 3], '<f4', []]",
    "torch_zero_size_strided": "ok:[[2, 0], '<f4', [[], []]]",
    "torch_0d": "ok:[[], '<f8', 2.5]",
    "torch_uint16": "ok:[[2], '<u2', [1, 65535]]",
    "torch_uint64": "ok:[[2], '<u8', [1, 9223372036854775808]]",
    "torch_unsqueezed": "ok:[[2, 1, 2], '<i8', [[[0, 1]], [[2, 3]]]]",
    "torch_of_tensor_0d": "ok:['torch.float64', [], 3.0]",
    "torch_of_tensor_bool": "ok:['torch.bool', [2], [True, False]]",
    "torch_of_tensor_empty": "ok:['torch.int8', [2, 0], [[], []]]",
}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL, "identity_all"]) as srv:
        yield srv


def run_case(server, name: str) -> str:
    return text_output(
        infer(server, "http", MODEL, {"MODE": bytes_input("case:" + name)}), "RESULT"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("case", list(OUTPUTS))
def test_output_built_from(server, protocol, case):
    datatype, want = OUTPUTS[case]
    result = infer(server, protocol, MODEL, {"MODE": bytes_input("out:" + case)})
    assert result.datatypes == {"OUT": datatype}
    got = result.outputs["OUT"]
    assert got.shape == want.shape
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize("case", list(CASES))
def test_in_the_model(server, case):
    assert run_case(server, case) == CASES[case]


@pytest.mark.parametrize("case", list(BLS))
def test_bls_input_made_from(server, case):
    result = infer(server, "http", MODEL, {"MODE": bytes_input("bls:" + case)})
    assert text_output(result, "RESULT") == BLS[case]


@needs_torch()
@pytest.mark.parametrize("case", list(TORCH_CASES))
def test_in_the_model_with_torch(server, case):
    assert run_case(server, case) == TORCH_CASES[case]


@needs_torch()
def test_a_torch_tensor_changed_after_from_dlpack_sends_the_change(server):
    result = infer(server, "http", MODEL, {"MODE": bytes_input("out:torch_mutated_after")})
    assert result.outputs["OUT"].tolist() == [4.0, 4.0, 4.0]


@needs_torch()
def test_a_dtype_dlpack_cannot_carry_is_refused_with_the_originals_text(server):
    assert run_case(server, "torch_complex").startswith("TritonModelException:Dtype is invalid.")


def test_readonly_numpy_into_from_dlpack_raises_numpys_buffer_error(server):
    """numpy refuses to export a read-only array; its BufferError reaches the model."""
    assert run_case(server, "dlpack_readonly").startswith(
        "BufferError:Cannot export readonly array since signalling readonly is unsupported by "
        "DLPack"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_inputs_as_the_model_sees_them(server, protocol):
    inputs = {
        "MODE": bytes_input("inputs"),
        "IN_BYTES": np.array([[b"a\x00", b""], [b"\xff", b"xxxxx"]], np.object_),
        "IN_FP16": np.array([0.5, -1.0], np.float16),
        "IN_INT8": np.zeros((2, 0), np.int8),
    }
    seen = json.loads(text_output(infer(server, protocol, MODEL, inputs), "RESULT"))
    assert seen == {
        "IN_BYTES": {
            "shape": [2, 2],
            "dtype": "|O",
            "numpy_shape": [2, 2],
            "writeable": True,
            "values": repr([[b"a\x00", b""], [b"\xff", b"xxxxx"]]),
            "to_dlpack": "TritonModelException:DLPack does not have support for string tensors.",
            "from_dlpack": "TritonModelException:DLPack does not have support for string tensors.",
        },
        "IN_FP16": {
            "shape": [2],
            "dtype": "<f2",
            "numpy_shape": [2],
            "writeable": True,
            "values": "[0.5, -1.0]",
            "np_from_dlpack": "ok:[0.5, -1.0]",
            "from_dlpack": "ok:[0.5, -1.0]",
        },
        "IN_INT8": {
            "shape": [2, 0],
            "dtype": "|i1",
            "numpy_shape": [2, 0],
            "writeable": True,
            "values": "[[], []]",
            "np_from_dlpack": "ok:[[], []]",
            "from_dlpack": "ok:[[], []]",
        },
    }


def test_bytes_input_with_a_zero_dimension(server):
    inputs = {"MODE": bytes_input("inputs"), "IN_BYTES": np.empty((2, 0), np.object_)}
    seen = json.loads(text_output(infer(server, "grpc", MODEL, inputs), "RESULT"))
    assert seen["IN_BYTES"]["numpy_shape"] == [2, 0]
    assert seen["IN_BYTES"]["dtype"] == "|O"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_output_not_in_the_config_is_dropped_unless_requested(server, protocol):
    result = infer(server, protocol, MODEL, {"MODE": bytes_input("extra")})
    assert result.outputs["OUT"].tolist() == [1.0]
    assert "NOT_IN_CONFIG" not in result.outputs
    error = infer_error(
        server, protocol, MODEL, {"MODE": bytes_input("extra")}, outputs=["NOT_IN_CONFIG"]
    )
    assert error.message == "unexpected inference output 'NOT_IN_CONFIG' for model 'tensor_corners'"


def test_an_output_name_twice_answers_the_first_when_requested(server):
    result = infer(server, "http", MODEL, {"MODE": bytes_input("duplicate")}, ["OUT"])
    assert result.outputs["OUT"].tolist() == [1.0]


# ------------------------------------------------------------------ deviations
@pytest.mark.deviation("ours takes big-endian arrays and sends them little-endian")
@pytest.mark.parametrize(
    "case,datatype,values",
    [("big_endian_int", "INT32", [1, 256, -2]), ("big_endian_float", "FP64", [1.5, -2.0])],
)
def test_big_endian_output_is_sent_little_endian(server, case, datatype, values):
    result = infer(server, "http", MODEL, {"MODE": bytes_input("out:" + case)})
    assert result.datatypes == {"OUT": datatype}
    assert result.outputs["OUT"].tolist() == values
    assert run_case(server, "dtype_big_endian") == "ok:[[2], '<i4', True, [1, 2]]"
    bls = infer(server, "http", MODEL, {"MODE": bytes_input("bls:big_endian")})
    assert text_output(bls, "RESULT") == "ok:[['OUT_INT32', '<i4', [1, 2], [[1, 256]]]]"


@pytest.mark.deviation("the original refuses big-endian arrays", backend="original")
def test_big_endian_array_is_refused_by_the_original(server):
    error = infer_error(server, "http", MODEL, {"MODE": bytes_input("out:big_endian_int")})
    assert error.message == "TritonModelException: NumPy dtype is not supported."
    assert run_case(server, "dtype_big_endian") == UNSUPPORTED
    bls = infer(server, "http", MODEL, {"MODE": bytes_input("bls:big_endian")})
    assert text_output(bls, "RESULT") == UNSUPPORTED


@pytest.mark.deviation(
    "a consumed DLPack capsule given again is refused with a clear error; the original reads "
    "the freed tensor (seen: a SystemError with a leaked error state, or 'DLDevice type "
    "210093075 is not support by Python backend.'), so its side is not pinned"
)
def test_a_consumed_capsule_is_refused(server):
    assert run_case(server, "dlpack_capsule_twice") == (
        "TritonModelException:DLPack capsule has already been consumed or is not a "
        "'dltensor' capsule."
    )


MASKED = (
    "AttributeError:Tensor 'T': a numpy masked array cannot be sent, its mask would be "
    "lost. Pass array.filled(<value>) (or array.data) instead."
)


@pytest.mark.deviation("ours refuses a masked array with an error that says why")
def test_a_masked_array_is_refused(server):
    assert run_case(server, "masked_as_numpy") == MASKED


@pytest.mark.deviation("the original fails on a masked array (AttributeError)", backend="original")
def test_a_masked_array_fails_on_the_original(server):
    assert run_case(server, "masked_as_numpy") == (
        "AttributeError:'numpy.ndarray' object has no attribute 'c_contiguous'"
    )


@pytest.mark.deviation(
    "ours: Tensor.from_dlpack of a Tensor shares its memory, so a later write through the "
    "source's as_numpy() shows in it"
)
def test_from_dlpack_of_a_tensor_shares_its_memory(server):
    assert run_case(server, "dlpack_of_tensor_shares") == "ok:['OUT', 'S', [5, 0]]"


@pytest.mark.deviation(
    "the original's Tensor.from_dlpack of a Tensor built from numpy does not see later writes "
    "through the source's as_numpy()",
    backend="original",
)
def test_from_dlpack_of_a_tensor_does_not_share_on_the_original(server):
    assert run_case(server, "dlpack_of_tensor_shares") == "ok:['OUT', 'S', [0, 0]]"


@needs_torch()
@pytest.mark.deviation("ours refuses a stride-0 (expanded) DLPack tensor instead of misreading it")
def test_an_expanded_torch_tensor_is_refused(server):
    assert run_case(server, "torch_expand") == NOT_CONTIGUOUS


@needs_torch()
@pytest.mark.deviation(
    "the original takes a stride-0 outermost dimension and reads past the data",
    backend="original",
)
def test_an_expanded_torch_tensor_is_misread_by_the_original(server):
    # Its second row is whatever lies past the tensor's 3 elements.
    assert run_case(server, "torch_expand").startswith("ok:[[2, 3], '<i8', [[0, 1, 2], [")


@pytest.mark.deviation("Tensor.from_dlpack of numpy arrays (the original's stub dies: test_qa_io)")
@pytest.mark.parametrize(
    "case,datatype,values",
    [
        ("from_dlpack_numpy_0d", "FP64", 4.5),
        ("from_dlpack_numpy_bool", "BOOL", [True, False]),
        ("from_dlpack_numpy_fp16", "FP16", [0.5, -1.0]),
    ],
)
def test_numpy_through_from_dlpack(server, case, datatype, values):
    result = infer(server, "http", MODEL, {"MODE": bytes_input("out:" + case)})
    assert result.datatypes == {"OUT": datatype}
    assert result.outputs["OUT"].tolist() == values
