"""What execute() returns and what the client sees for it (spec 4.2, 4.3), HTTP and gRPC."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error, text_output
from conformance_support.control import wait_for
from conformance_support.sources import marker_line

MODELS = ["return_rules", "no_execute", "batch_list"]
PREFIX = "Failed to process the request(s) for model 'return_rules_0', message: "


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def model_file(feature_repository):
    return feature_repository.model_dir("return_rules") / "1" / "model.py"


def run_mode(server, protocol, mode, **kwargs):
    return infer(server, protocol, "return_rules", {"MODE": bytes_input(mode)}, **kwargs)


def mode_error(server, protocol, mode):
    return infer_error(server, protocol, "return_rules", {"MODE": bytes_input(mode)})


INTERNAL = {"http": "500", "grpc": "StatusCode.INTERNAL"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_one_response_per_request(server, protocol):
    assert run_mode(server, protocol, "ok").outputs["OUT"].tolist() == [7]


RETURN_ERRORS = {
    "too_many": "Number of InferenceResponse objects do not match the number of InferenceRequest "
    "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:2\n",
    "too_few": "Number of InferenceResponse objects do not match the number of InferenceRequest "
    "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n",
    "tuple": "Expected a list in the execute return, found type '<class 'tuple'>'.",
    "not_response": "Expected an 'InferenceResponse' object in the execute function return list, "
    "found type '<class 'str'>'.",
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode", list(RETURN_ERRORS))
def test_invalid_return_value_fails_the_batch(server, protocol, mode):
    error = mode_error(server, protocol, mode)
    assert error.message == PREFIX + RETURN_ERRORS[mode]
    assert error.status == INTERNAL[protocol]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "mode,rendered",
    [
        ("raise", "ValueError: boom from execute"),
        ("raise_model_exception", "TritonModelException: model says no"),
    ],
)
def test_exception_in_execute_is_rendered_with_traceback(
    server, model_file, protocol, mode, rendered
):
    """pybind11 rendering: '<Type>: <msg>\\n\\nAt:\\n  <file>(<line>): <function>\\n'."""
    error = mode_error(server, protocol, mode)
    frame = f"  {model_file}({marker_line(model_file, mode)}): execute\n"
    assert error.message == f"{PREFIX}{rendered}\n\nAt:\n{frame}"
    assert error.status == INTERNAL[protocol]


# TritonError code -> (HTTP status, gRPC status) as the original delivers them.
CODE_STATUS = {
    "UNKNOWN": ("400", "StatusCode.UNKNOWN"),
    "INTERNAL": ("500", "StatusCode.INTERNAL"),
    "NOT_FOUND": ("404", "StatusCode.NOT_FOUND"),
    "INVALID_ARG": ("400", "StatusCode.INVALID_ARGUMENT"),
    "UNAVAILABLE": ("503", "StatusCode.UNAVAILABLE"),
    "UNSUPPORTED": ("501", "StatusCode.UNIMPLEMENTED"),
    "ALREADY_EXISTS": ("400", "StatusCode.ALREADY_EXISTS"),
    "CANCELLED": ("400", "StatusCode.CANCELLED"),
}


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("code", list(CODE_STATUS))
def test_error_response_code_reaches_the_client(server, protocol, code):
    error = mode_error(server, protocol, f"error_code_{code}")
    assert error.message == f"failed with {code}"
    assert error.status == CODE_STATUS[code][PROTOCOLS.index(protocol)]


def test_pb_utils_enums_print_as_the_originals(server):
    """repr, str, an f-string and format() of each TritonError code, Logger level,
    MetricFamily kind and memory type, its truth and its equality with its number: a model
    that logs or returns one's text says the same under both backends (ours once printed
    "4", an IntEnum's text on Python 3.11, "ErrorCode.UNAVAILABLE" before)."""
    text = text_output(run_mode(server, "http", "code_text"), "MSG")
    members = [("__ErrorCode", name, value) for value, name in enumerate(CODE_STATUS)]
    members += [("LogLevel", n, v) for v, n in enumerate(["INFO", "WARNING", "ERROR", "VERBOSE"])]
    members += [("MetricKind", n, v) for v, n in enumerate(["COUNTER", "GAUGE", "HISTOGRAM"])]
    members += [("MemoryType", f"TRITONSERVER_MEMORY_{n}", v) for v, n in enumerate(["GPU", "CPU"])]
    assert text.splitlines() == [
        f"<{kind}.{name}: {value}> {kind}.{name} {kind}.{name} {kind}.{name} True True"
        for kind, name, value in members
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_response_default_code_is_internal(server, protocol):
    error = mode_error(server, protocol, "error_default_code")
    assert error.message == "failed with the default code"
    assert error.status == INTERNAL[protocol]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_error_response_ignores_its_outputs(server, protocol):
    error = mode_error(server, protocol, "error_with_outputs")
    assert error.message == "outputs are ignored"
    assert error.status == CODE_STATUS["INVALID_ARG"][PROTOCOLS.index(protocol)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "mode,value", [("send_final_with_response", 11), ("send_then_final", 12), ("send_twice", 13)]
)
def test_default_mode_response_sender(server, protocol, mode, value):
    """None in the returned list is fine when the response went through the sender."""
    assert run_mode(server, protocol, mode).outputs["OUT"].tolist() == [value]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_sender_final_before_any_response_raises(server, protocol):
    result = run_mode(server, protocol, "send_final_first")
    assert text_output(result, "MSG") == (
        "TritonModelException:Unable to send response. Non-decoupled model cannot send "
        "complete final before sending a response."
    )


MORE_THAN_ONE = (
    "TritonModelException:Unable to send response. "
    "Non-decoupled model cannot send more than one response."
)


@pytest.mark.parametrize("mode", ["send_twice", "send_after_final"])
def test_sender_second_response_raises(server, feature_repository, mode):
    report = feature_repository.model_dir("return_rules") / "reports" / f"{mode}.txt"
    report.unlink(missing_ok=True)
    run_mode(server, "grpc", mode)
    # The client has its response before the model tries the second send: wait for it.
    wait_for(report.exists, 10, f"{report.name}")
    assert report.read_text() == MORE_THAN_ONE


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_returning_a_response_after_sending_one_keeps_the_sent_one(server, protocol):
    """The returned response counts against the sender: the client gets the sent one and
    the stub reports the second as an error in the server log."""
    assert run_mode(server, protocol, "send_then_return").outputs["OUT"].tolist() == [15]
    expected = PREFIX + MORE_THAN_ONE.split(":", 1)[1]
    # The stub's log line travels apart from the response: it may land a moment later.
    wait_for(lambda: expected in server.log_text(), 10, "the error in the server log")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_missing_execute_fails_every_request(server, feature_repository, protocol):
    path = feature_repository.model_dir("no_execute") / "1" / "model.py"
    error = infer_error(server, protocol, "no_execute", {"IN": np.array([1], np.int32)})
    assert error.message == (
        "Failed to process the request(s) for model 'no_execute_0', message: "
        f"Python model {path} does not implement `execute` method."
    )
    assert error.status == INTERNAL[protocol]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_batched_requests_arrive_as_a_list(server, protocol):
    """Four concurrent requests form one batch (preferred size 4): execute gets a list of
    four InferenceRequest objects, each answered by its own response, in order."""
    results: dict[int, object] = {}

    def send(i: int) -> None:
        try:
            results[i] = infer(server, protocol, "batch_list", {"IN": np.array([[i]], np.int32)})
        except InferenceServerException as exc:
            results[i] = exc

    threads = [threading.Thread(target=send, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results) == [0, 1, 2, 3]
    positions = set()
    for i, result in results.items():
        assert not isinstance(result, Exception), result
        assert result.outputs["OUT"].tolist() == [[i]]
        ((batch_len, index),) = result.outputs["POSITION"].tolist()
        assert batch_len == 4
        positions.add(index)
    assert positions == {0, 1, 2, 3}


NO_RESPONSE_MODES = ["none_list_without_send", "return_none_without_send"]


@pytest.mark.deviation(
    "original: a request whose returned entry is None (or execute returned None) and that "
    "never used its sender gets no response at all, the client hangs (spec 10 QUIRK); "
    "ours answers it with an error"
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("mode", NO_RESPONSE_MODES)
def test_request_left_without_response_gets_an_error(server, protocol, mode):
    error = infer_error(
        server, protocol, "return_rules", {"MODE": bytes_input(mode)}, client_timeout=10
    )
    assert error.message.startswith(PREFIX), error.message
    assert "None" in error.message
    assert error.status == INTERNAL[protocol]


@pytest.mark.deviation(
    "pins the original's hang that ours fixes (spec 10 QUIRK)", backend="original"
)
@pytest.mark.parametrize("mode", NO_RESPONSE_MODES)
def test_original_leaves_request_without_response(server, mode):
    with pytest.raises(InferenceServerException) as info:
        run_mode(server, "grpc", mode, client_timeout=1.5)
    assert info.value.status() == "StatusCode.DEADLINE_EXCEEDED"
