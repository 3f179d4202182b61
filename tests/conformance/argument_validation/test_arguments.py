"""pb_utils constructors and methods given bad arguments: exact errors (spec 3.1, 3.2).

The model runs one case per request and reports "ok:<repr>" or "<ExcType>:<message>".
Errors that pybind11 itself generates (argument conversion) are checked by type only: their
text lists C++ signatures that a clean-room implementation does not reproduce.
"""

from __future__ import annotations

import re

import pytest

from conformance_support.clients import bytes_input, infer, text_output

EXACT = {
    "tensor_empty_name": "TritonModelException:Tensor name cannot be an empty string.",
    "tensor_unicode_dtype": "TritonModelException:NumPy dtype is not supported.",
    "tensor_complex_dtype": "TritonModelException:NumPy dtype is not supported.",
    "tensor_as_numpy_is_same_object": "ok:True",
    "tensor_non_contiguous": "ok:True",
    "tensor_non_contiguous_values": "ok:[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]",
    "tensor_accessors": "ok:['T', [2], True]",
    "tensor_bytes_as_numpy": "ok:[b'a', b'bc']",
    "tensor_bytes_to_dlpack": "TritonModelException:DLPack does not have support for string "
    "tensors.",
    "tensor_dlpack_device": "ok:(1, 0)",
    "error_is_not_an_exception": "ok:False",
    "error_raise": "TypeError:exceptions must derive from BaseException",
    "error_default_code": "ok:['m', True]",
    "error_codes": "ok:[0, 1, 2, 3, 4, 5, 6, 7]",
    "model_exception_is_exception": "ok:True",
    "response_none_tensor": "TritonModelException:Output tensor for inference response should "
    "not be empty.",
    "response_defaults": "ok:[[], False, None]",
    "response_with_error": "ok:[True, 'e']",
    "request_none_input": "TritonModelException:Input tensor for request with id '' and model "
    "name 'm' should not be empty.",
    "request_empty_output_name": "TritonModelException:Requested output name for request with "
    "id '' and model name 'm' should not be empty.",
    "request_float_correlation_id": "TritonModelException:Correlation ID must be integer or string",
    "request_string_correlation_id": "ok:'c-1'",
    "request_accessors": "ok:['r1', 9, 1, 5, ['O1'], ['T']]",
    "request_param_key_not_str": "TritonModelException:Expect parameters keys to have type str, "
    "found type <class 'int'>",
    "request_param_value_float": "TritonModelException:Expect parameters values to have type "
    "bool/int/str, found type <class 'float'>",
    "sender_bad_flag": "TritonModelException:Unable to send response. Unsupported flag provided.",
    "sender_no_response_flag_zero": "TritonModelException:Inference Response object must be "
    "provided when the response flags is set to zero.",
    "constants": "ok:[1, 2, 1, 1, 2, 0, 1]",
    "logger_levels": "ok:[0, 1, 2, 3]",
    "type_helpers": "ok:[True, True, None, 10, 13, 13, True, True]",
    "triton_string_to_numpy_bf16": "KeyError:'TYPE_BF16'",
    "serialize_empty": "ok:()",
    "serialize_bytes": "ok:b'\\x02\\x00\\x00\\x00ab\\x03\\x00\\x00\\x00c\\xc3\\xa9\\x01\\x00\\x00"
    "\\x007'",
    "serialize_other_dtype": "ok:None",
    "deserialize": "ok:[b'ab', b'']",
    "config_lookup": "ok:[{'name': 'A'}, None, False, True]",
    "input_lookup": "ok:['CASE', None]",
}
# pybind11 argument-conversion errors: the exception type is the contract.
TYPE_ONLY = {
    "tensor_not_array": "TypeError",
    "tensor_keyword_args": "TypeError",
    "response_not_tensor": "TypeError",
    "response_error_not_triton_error": "TypeError",
    "set_release_flags_keyword": "TypeError",
}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=["argval"]) as srv:
        yield srv


def run_case(server, case: str) -> str:
    return text_output(infer(server, "http", "argval", {"CASE": bytes_input(case)}), "OUTCOME")


@pytest.mark.parametrize("case", list(EXACT))
def test_exact_outcome(server, case):
    assert run_case(server, case) == EXACT[case]


@pytest.mark.parametrize("case", list(TYPE_ONLY))
def test_argument_conversion_error_type(server, case):
    outcome = run_case(server, case)
    assert outcome.split(":", 1)[0] == TYPE_ONLY[case], outcome


def test_from_dlpack_without_protocol(server):
    """The original's text carries a run of spaces from a C++ line continuation; the words
    are the contract."""
    outcome = run_case(server, "tensor_from_dlpack_no_protocol")
    assert " ".join(outcome.split()) == (
        "TritonModelException:Provided tensor is not supported. Tensor must be a DLPack capsule "
        "or have `__dlpack__` and `__dlpack_device__` attributes"
    )


@pytest.mark.deviation("Tensor.triton_dtype() raises TypeError in the original (spec 10 QUIRK)")
def test_triton_dtype_returns_the_code(server):
    assert run_case(server, "tensor_triton_dtype") == "ok:8"


@pytest.mark.deviation("pins the original's broken Tensor.triton_dtype()", backend="original")
def test_original_triton_dtype_raises(server):
    assert run_case(server, "tensor_triton_dtype").startswith(
        "TypeError:Unable to convert function return value to a Python type!"
    )


@pytest.mark.deviation(
    "InferenceResponse(parameters=...) is upstream HEAD (spec 3.2); the 24.10 original has no "
    "such argument"
)
@pytest.mark.parametrize(
    "case,expected",
    [
        (
            "response_param_key_not_str",
            "TritonModelException:Expect parameters keys to have type str, found type "
            "<class 'int'>",
        ),
        (
            "response_param_value_float",
            "TritonModelException:Expect parameters values to have type bool/int/str, found "
            "type <class 'float'>",
        ),
        (
            "response_param_not_dict",
            "TritonModelException:Expect parameters to be a dict, got <class 'list'>",
        ),
        (
            "response_param_value_none",
            "TritonModelException:Expect parameters values to have type bool/int/str, found "
            "type <class 'NoneType'>",
        ),
        (
            "response_param_value_list",
            "TritonModelException:Expect parameters values to have type bool/int/str, found "
            "type <class 'list'>",
        ),
    ],
)
def test_response_parameter_errors(server, case, expected):
    assert run_case(server, case) == expected


def test_every_case_of_the_model_is_checked(feature_repository):
    source = (feature_repository.model_dir("argval") / "1" / "model.py").read_text()
    in_model = set(re.findall(r'^        "(\w+)": ', source, re.M))
    checked = set(EXACT) | set(TYPE_ONLY)
    checked |= {"tensor_from_dlpack_no_protocol", "tensor_triton_dtype"}
    checked |= {"response_param_key_not_str", "response_param_value_float"}
    checked |= {"response_param_not_dict", "response_param_value_none"}
    checked |= {"response_param_value_list"}
    assert in_model == checked
