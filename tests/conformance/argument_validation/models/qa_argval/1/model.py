"""What qa/L0_backend_python/argument_validation asserts inside its model (the four groups
test_infer_request_args, test_infer_response_args, test_tensor_args, test_log_args), written
here as data: (group, what, call, the exception expected or None for "accepted")."""

import numpy as np

import triton_python_backend_utils as pb_utils


def _request(**overrides):
    arguments = dict(
        inputs=[pb_utils.Tensor("INPUT0", np.asarray([1, 2], dtype=np.int32))],
        model_name="my_model",
        requested_output_names=["my_output"],
    )
    arguments.update(overrides)
    return pb_utils.InferenceRequest(**arguments)


def _correlation_id(value):
    found = _request(correlation_id=value).correlation_id()
    if found != value or type(found) is not type(value):
        raise AssertionError(f"correlation_id() is {found!r}, expected {value!r}")


def _default_correlation_id():
    found = _request().correlation_id()
    if found != 0 or type(found) is not int:
        raise AssertionError(f"default correlation_id() is {found!r}, expected 0")


def checks(model_name):
    TME = pb_utils.TritonModelException
    array = np.asarray([1, 2], dtype=np.int32)
    outputs = [pb_utils.Tensor("OUTPUT0", array)]
    logger = pb_utils.Logger
    return [
        ("request", "inputs=[None]", lambda: _request(inputs=[None]), TME),
        ("request", "inputs=None", lambda: _request(inputs=None), TypeError),
        ("request", "model_name=None", lambda: _request(model_name=None), TypeError),
        ("request", "outputs=[None]", lambda: _request(requested_output_names=[None]), TypeError),
        ("request", "outputs=None", lambda: _request(requested_output_names=None), TypeError),
        ("request", "correlation_id=None", lambda: _request(correlation_id=None), TypeError),
        ("request", "correlation_id=5", lambda: _correlation_id(5), None),
        ("request", "correlation_id=str", lambda: _correlation_id("test_str_id-5"), None),
        ("request", "correlation_id default", _default_correlation_id, None),
        ("request", "request_id=None", lambda: _request(request_id=None), TypeError),
        ("request", "model_version=None", lambda: _request(model_version=None), TypeError),
        ("request", "flags=None", lambda: _request(flags=None), TypeError),
        ("request", "empty lists", lambda: _request(requested_output_names=[], inputs=[]), None),
        ("response", "[None]", lambda: pb_utils.InferenceResponse(output_tensors=[None]), TME),
        ("response", "None", lambda: pb_utils.InferenceResponse(output_tensors=None), TypeError),
        ("response", "[]", lambda: pb_utils.InferenceResponse(output_tensors=[]), None),
        ("response", "positional", lambda: pb_utils.InferenceResponse(outputs), None),
        ("tensor", "name None", lambda: pb_utils.Tensor(None, array), TypeError),
        ("tensor", "array None", lambda: pb_utils.Tensor("OUTPUT0", None), TypeError),
        ("tensor", "from_dlpack None", lambda: pb_utils.Tensor.from_dlpack("OUTPUT0", None), TME),
        ("tensor", "from_dlpack '' None", lambda: pb_utils.Tensor.from_dlpack("", None), TME),
        ("tensor", "'' and None", lambda: pb_utils.Tensor("", None), TypeError),
        ("log", "level None", lambda: logger.log("Invalid Level", None), TypeError),
        ("log", "level int", lambda: logger.log("Invalid Level", 1), TypeError),
        ("log", "log_info None", lambda: logger.log_info(None), TypeError),
        ("log", "log_warn None", lambda: logger.log_warn(None), TypeError),
        ("log", "log_error None", lambda: logger.log_error(None), TypeError),
        ("log", "log_verbose None", lambda: logger.log_verbose(None), TypeError),
        ("log", "default level", lambda: logger.log("Level unspecified"), None),
        # examples/bls (sync_model.py): the model name read from an input tensor is a
        # numpy.bytes_, and the call goes through.
        ("bls", "model_name numpy.bytes_", lambda: _bls(model_name), None),
    ]


def _bls(model_name):
    tensor = pb_utils.Tensor("INPUT0", np.asarray([3, 4], dtype=np.int32))
    request = pb_utils.InferenceRequest(
        model_name=model_name, inputs=[tensor], requested_output_names=["OUTPUT0"]
    )
    response = request.exec()
    if response.has_error():
        raise AssertionError(response.error().message())
    out = pb_utils.get_output_tensor_by_name(response, "OUTPUT0").as_numpy()
    if out.tolist() != [3, 4]:
        raise AssertionError(f"BLS output {out.tolist()}")


def run(model_name):
    failures = []
    for group, what, call, expected in checks(model_name):
        try:
            call()
        except Exception as exc:  # noqa: BLE001 - which exception is the finding
            if expected is None or not isinstance(exc, expected):
                failures.append(f"{group} {what}: {type(exc).__name__}: {exc}")
            continue
        if expected is not None:
            failures.append(f"{group} {what}: accepted, expected {expected.__name__}")
    return failures


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            name = pb_utils.get_input_tensor_by_name(request, "MODEL_NAME").as_numpy()[0]
            text = "\n".join(run(name))
            out = pb_utils.Tensor("FAILURES", np.array([text.encode()], dtype=object))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
