"""Response-sender rules for default and decoupled models (spec §3.2, §4.3, §4.4)."""

# ruff: noqa: E501 - exact upstream messages stay on one line so they can be grepped for

from __future__ import annotations

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from pybackend.utils import transport
from pybackend.utils.request import InferenceRequest

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


@pytest.fixture()
def recorder():
    t = transport.InProcessTransport()
    previous = transport.set_transport(t)
    yield t
    transport.set_transport(previous)


def request(decoupled: bool) -> InferenceRequest:
    return InferenceRequest._incoming(1, "r", 0, [], ["A"], 0, 0, "{}", decoupled)


def response() -> pb_utils.InferenceResponse:
    return pb_utils.InferenceResponse([pb_utils.Tensor("A", np.ones(1))])


def error_text(fn) -> str:
    with pytest.raises(pb_utils.TritonModelException) as e:
        fn()
    return str(e.value)


def test_default_mode_one_response_with_final(recorder) -> None:
    s = request(False).get_response_sender()
    s.send(response(), flags=FINAL)
    assert len(recorder.sent) == 1 and recorder.sent[0][2] == FINAL
    # The one-response rule is checked before the closed state, as in the original.
    assert error_text(lambda: s.send(response())) == (
        "Unable to send response. Non-decoupled model cannot send more than one response."
    )
    assert error_text(lambda: s.send(flags=FINAL)) == (
        "Unable to send response. Response sender has been closed."
    )


def test_default_mode_response_then_final(recorder) -> None:
    s = request(False).get_response_sender()
    s.send(response())
    assert error_text(lambda: s.send(response())) == (
        "Unable to send response. Non-decoupled model cannot send more than one response."
    )
    s.send(flags=FINAL)
    assert [f for *_, f in recorder.sent] == [0, FINAL]


def test_default_mode_final_first(recorder) -> None:
    s = request(False).get_response_sender()
    assert error_text(lambda: s.send(flags=FINAL)) == (
        "Unable to send response. Non-decoupled model cannot send complete final before sending a response."
    )
    assert recorder.sent == []


def test_flag_and_argument_errors(recorder) -> None:
    s = request(True).get_response_sender()
    assert (
        error_text(lambda: s.send(response(), flags=2))
        == "Unable to send response. Unsupported flag provided."
    )
    assert error_text(lambda: s.send()) == (
        "Inference Response object must be provided when the response flags is set to zero."
    )
    with pytest.raises(TypeError):
        s.send("nope")


def test_decoupled_many_then_final(recorder) -> None:
    s = request(True).get_response_sender()
    for _ in range(3):
        s.send(response())
    s.send(flags=FINAL)
    assert [f for *_, f in recorder.sent] == [0, 0, 0, FINAL]
    assert (
        error_text(lambda: s.send(flags=FINAL))
        == "Unable to send response. Response sender has been closed."
    )


def test_decoupled_zero_responses(recorder) -> None:
    s = request(True).get_response_sender()
    s.send(flags=FINAL)
    assert recorder.sent[0][1] is None


def test_returned_response_counts_against_the_sender(recorder) -> None:
    r = request(False)
    s = r.get_response_sender()
    s.send(response())
    with pytest.raises(pb_utils.TritonModelException, match="more than one response"):
        s._take_returned()
    r2 = request(False)
    r2.get_response_sender().send(response(), FINAL)
    with pytest.raises(pb_utils.TritonModelException, match="more than one response"):
        r2.get_response_sender()._take_returned()
    r3 = request(False)
    r3.get_response_sender()._close()  # e.g. its batch failed
    with pytest.raises(pb_utils.TritonModelException, match="has been closed"):
        r3.get_response_sender()._take_returned()
