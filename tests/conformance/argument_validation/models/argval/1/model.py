import numpy as np

import triton_python_backend_utils as pb_utils


def tensor():
    return pb_utils.Tensor("T", np.array([1, 2], np.int32))


def cases(request):
    """case name -> zero-argument callable; `request` is the live InferenceRequest."""
    Tensor = pb_utils.Tensor
    Request = pb_utils.InferenceRequest
    Response = pb_utils.InferenceResponse
    Error = pb_utils.TritonError
    array = np.arange(6, dtype=np.float32).reshape(2, 3)
    return {
        # Tensor
        "tensor_empty_name": lambda: Tensor("", array),
        "tensor_unicode_dtype": lambda: Tensor("T", np.array(["a"], dtype=np.str_)),
        "tensor_complex_dtype": lambda: Tensor("T", np.array([1j])),
        "tensor_not_array": lambda: Tensor("T", [1, 2]),
        "tensor_keyword_args": lambda: Tensor(name="T", array=array),
        "tensor_as_numpy_is_same_object": lambda: Tensor("T", array).as_numpy() is array,
        "tensor_non_contiguous": lambda: Tensor("T", array.T).as_numpy().flags["C_CONTIGUOUS"],
        "tensor_non_contiguous_values": lambda: Tensor("T", array.T).as_numpy().tolist(),
        "tensor_accessors": lambda: [tensor().name(), tensor().shape(), tensor().is_cpu()],
        "tensor_bytes_as_numpy": lambda: (
            Tensor("S", np.array([b"a", b"bc"], dtype=object)).as_numpy().tolist()
        ),
        "tensor_bytes_to_dlpack": lambda: Tensor("S", np.array([b"a"], dtype=object)).to_dlpack(),
        "tensor_from_dlpack_no_protocol": lambda: Tensor.from_dlpack("T", [1, 2]),
        "tensor_dlpack_device": lambda: tensor().__dlpack_device__(),
        "tensor_triton_dtype": lambda: int(tensor().triton_dtype()),
        # TritonError
        "error_is_not_an_exception": lambda: isinstance(Error("x"), Exception),
        "error_raise": lambda: _raise(Error("x")),
        "error_default_code": lambda: [Error("m").message(), Error("m").code() == Error.INTERNAL],
        "error_codes": lambda: [
            int(Error.UNKNOWN),
            int(Error.INTERNAL),
            int(Error.NOT_FOUND),
            int(Error.INVALID_ARG),
            int(Error.UNAVAILABLE),
            int(Error.UNSUPPORTED),
            int(Error.ALREADY_EXISTS),
            int(Error.CANCELLED),
        ],
        "model_exception_is_exception": lambda: issubclass(
            pb_utils.TritonModelException, Exception
        ),
        # InferenceResponse
        "response_none_tensor": lambda: Response([None]),
        "response_not_tensor": lambda: Response(["x"]),
        "response_error_not_triton_error": lambda: Response(error="bad"),
        "response_defaults": lambda: [
            Response().output_tensors(),
            Response().has_error(),
            Response().error(),
        ],
        "response_with_error": lambda: [
            Response(error=Error("e")).has_error(),
            Response(error=Error("e")).error().message(),
        ],
        "response_param_key_not_str": lambda: Response(parameters={1: "x"}),
        "response_param_value_float": lambda: Response(parameters={"k": 1.5}),
        "response_param_not_dict": lambda: Response(parameters=[]),
        "response_param_value_none": lambda: Response(parameters={"k": None}),
        "response_param_value_list": lambda: Response(parameters={"k": ["v"]}),
        # InferenceRequest (BLS constructor; never executed here)
        "request_none_input": lambda: Request(
            model_name="m", inputs=[None], requested_output_names=[]
        ),
        "request_empty_output_name": lambda: Request(
            model_name="m", inputs=[tensor()], requested_output_names=[""]
        ),
        "request_float_correlation_id": lambda: Request(
            model_name="m", inputs=[tensor()], requested_output_names=[], correlation_id=1.5
        ),
        "request_string_correlation_id": lambda: Request(
            model_name="m", inputs=[tensor()], requested_output_names=[], correlation_id="c-1"
        ).correlation_id(),
        "request_accessors": lambda: _request_accessors(Request),
        "request_param_key_not_str": lambda: Request(
            model_name="m", inputs=[], requested_output_names=[], parameters={1: "x"}
        ),
        "request_param_value_float": lambda: Request(
            model_name="m", inputs=[], requested_output_names=[], parameters={"k": 1.5}
        ),
        # Response sender (non-decoupled rules that do not consume the response)
        "sender_bad_flag": lambda: request.get_response_sender().send(Response(), flags=5),
        "sender_no_response_flag_zero": lambda: request.get_response_sender().send(None, 0),
        "set_release_flags_keyword": lambda: request.set_release_flags(flags=1),
        # Module constants and helpers
        "constants": lambda: [
            pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START,
            pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END,
            pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL,
            pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
            int(pb_utils.TRITONSERVER_MEMORY_GPU),
            int(pb_utils.TRITONSERVER_MEMORY_CPU),
        ],
        "logger_levels": lambda: [
            int(pb_utils.Logger.INFO),
            int(pb_utils.Logger.WARNING),
            int(pb_utils.Logger.ERROR),
            int(pb_utils.Logger.VERBOSE),
        ],
        # Identity checks: numpy 2 renamed np.bool_ to np.bool (same object, new __name__).
        "type_helpers": lambda: [
            pb_utils.triton_to_numpy_type(1) is np.bool_,
            pb_utils.triton_to_numpy_type(13) is np.object_,
            pb_utils.triton_to_numpy_type(14),
            pb_utils.numpy_to_triton_type(np.float16),
            pb_utils.numpy_to_triton_type(np.bytes_),
            pb_utils.numpy_to_triton_type(np.object_),
            pb_utils.triton_string_to_numpy("TYPE_BOOL") is bool,
            pb_utils.triton_string_to_numpy("TYPE_FP16") is np.float16,
        ],
        "triton_string_to_numpy_bf16": lambda: pb_utils.triton_string_to_numpy("TYPE_BF16"),
        "serialize_empty": lambda: pb_utils.serialize_byte_tensor(np.array([], dtype=object)),
        "serialize_bytes": lambda: pb_utils.serialize_byte_tensor(
            np.array([b"ab", "c\u00e9", 7], dtype=object)
        ),
        "serialize_other_dtype": lambda: pb_utils.serialize_byte_tensor(np.array([1.0])),
        "deserialize": lambda: pb_utils.deserialize_bytes_tensor(
            b"\x02\x00\x00\x00ab\x00\x00\x00\x00"
        ).tolist(),
        "config_lookup": lambda: [
            pb_utils.get_input_config_by_name({"input": [{"name": "A"}], "output": []}, "A"),
            pb_utils.get_output_config_by_name({"input": [], "output": []}, "A"),
            pb_utils.using_decoupled_model_transaction_policy({}),
            pb_utils.using_decoupled_model_transaction_policy(
                {"model_transaction_policy": {"decoupled": True}}
            ),
        ],
        "input_lookup": lambda: [
            pb_utils.get_input_tensor_by_name(request, "CASE").name(),
            pb_utils.get_input_tensor_by_name(request, "MISSING"),
        ],
    }


def _raise(value):
    raise value


def _request_accessors(Request):
    request = Request(
        request_id="r1",
        model_name="m",
        inputs=[tensor()],
        requested_output_names=["O1"],
        correlation_id=9,
        flags=1,
        timeout=5,
    )
    return [
        request.request_id(),
        request.correlation_id(),
        request.flags(),
        request.timeout(),
        sorted(request.requested_output_names()),
        [t.name() for t in request.inputs()],
    ]


def outcome(action):
    try:
        value = action()
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return f"ok:{value!r}"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            case = pb_utils.get_input_tensor_by_name(request, "CASE").as_numpy()[0].decode()
            result = outcome(cases(request)[case])
            encoded = np.array([result.encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTCOME", encoded)]))
        return responses
