"""Error texts carry the model's frames and nothing of the backend's machinery (issue 27):
pybind11's rendering, ``<Type>: <msg>\\n\\nAt:\\n  <file>(<line>): <function>\\n``, innermost
first, ending at the model's outermost frame (execute, initialize, finalize), on every path:
sync and ``async def`` execute, decoupled (raised in execute, or by a closed response
sender), a BLS callee's error as its caller sees it and as the caller's client sees it once
re-raised, initialize and finalize. ``auto_complete_config``: auto_complete/test_ac_enabled."""

from __future__ import annotations

import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error, text_output
from conformance_support.control import load_error, unload, wait_for
from conformance_support.sources import marker_line
from conformance_support.streaming import stream_once

MODELS = [
    "tb_sync",
    "tb_async",
    "tb_decoupled",
    "tb_decoupled_async",
    "tb_callee_sync",
    "tb_callee_async",
    "tb_finalize",
]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def frame(feature_repository):
    """``frame(model, marker, function)``: the line pybind11 writes for the source line of
    ``model``'s model.py tagged ``# LINE:<marker>``."""

    def make(model: str, marker: str, function: str) -> str:
        path = feature_repository.model_dir(model) / "1" / "model.py"
        return f"  {path}({marker_line(path, marker)}): {function}\n"

    return make


def failed(model: str) -> str:
    return f"Failed to process the request(s) for model '{model}_0', message: "


def raised(model: str, what: str, frame, caller: str = "execute", at: str = "execute") -> str:
    """The text of ``fail(what)`` called from ``caller`` of ``model`` at marker ``at``."""
    return (
        f"ValueError: {what} boom\n\nAt:\n"
        + frame(model, "fail", "fail")
        + frame(model, at, caller)
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model,what", [("tb_sync", "sync"), ("tb_async", "async")])
def test_execute_error_ends_at_the_models_frame(server, frame, protocol, model, what):
    error = infer_error(server, protocol, model, {"MODE": bytes_input("raise")})
    assert error.message == failed(model) + raised(model, what, frame)


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "mode,text,at",
    [
        ("sys_exit", "SystemExit: 3", "exit"),
        ("interrupt", "KeyboardInterrupt: stop", "interrupt"),
        ("base_exception", "Stop: custom", "base"),
    ],
)
def test_sys_exit_in_execute_is_that_batchs_error(server, frame, protocol, mode, text, at):
    """pybind11 turns SystemExit, KeyboardInterrupt and any other BaseException into an error
    like any other: the batch fails with its text, and the same stub answers the next one."""
    error = infer_error(server, protocol, "tb_sync", {"MODE": bytes_input(mode)})
    assert error.message == failed("tb_sync") + f"{text}\n\nAt:\n" + frame("tb_sync", at, "execute")
    assert (
        text_output(infer(server, protocol, "tb_sync", {"MODE": bytes_input("ok")}), "MSG") == "ok"
    )


@pytest.mark.deviation("the original never answers: SystemExit ends its event loop's thread")
def test_sys_exit_in_async_execute_is_that_batchs_error(server, frame):
    error = infer_error(server, "http", "tb_async", {"MODE": bytes_input("sys_exit")})
    assert error.message == failed("tb_async") + "SystemExit: 3\n\nAt:\n" + frame(
        "tb_async", "exit", "execute"
    )
    error = infer_error(server, "grpc", "tb_async", {"MODE": bytes_input("base_exception")})
    assert error.message == failed("tb_async") + "Stop: custom\n\nAt:\n" + frame(
        "tb_async", "base", "execute"
    )
    error = infer_error(server, "grpc", "tb_async", {"MODE": bytes_input("raise")})
    assert error.message == failed("tb_async") + raised("tb_async", "async", frame)


@pytest.mark.parametrize(
    "mode,at", [("raise", "execute"), ("send_then_raise", "execute_after_send")]
)
def test_decoupled_execute_error_ends_at_the_models_frame(server, frame, mode, at):
    events = stream_once(server, "tb_decoupled", {"MODE": bytes_input(mode)}, timeout=30)
    assert events[-1].error == failed("tb_decoupled") + raised(
        "tb_decoupled", "decoupled", frame, at=at
    )


@pytest.mark.deviation("the original never answers the request (it only logs a traceback)")
@pytest.mark.parametrize(
    "mode,at,sent", [("raise", "execute", []), ("send_then_raise", "execute_after_send", ["first"])]
)
def test_async_decoupled_execute_error_ends_at_the_models_frame(server, frame, mode, at, sent):
    """Its sender never taken, the request ends with the error; taken, used and dropped, the
    request stays open for it, and ends with the same text once it is collected."""
    model = "tb_decoupled_async"
    events = stream_once(server, model, {"MODE": bytes_input(mode)}, timeout=30)
    assert [e.value("MSG") for e in events[:-1]] == sent
    assert events[-1].error == failed(model) + raised(model, "async decoupled", frame, at=at)


def test_closed_sender_error_ends_at_the_models_frame(server, frame):
    """send() after the final flag raises inside the binding (ours: inside pb_utils): the
    error leaving execute names only the model's line, in the server log."""
    events = stream_once(server, "tb_decoupled", {"MODE": bytes_input("sender_closed")}, timeout=30)
    assert [e.value("MSG") for e in events] == ["last"]
    text = (
        "TritonModelException: Unable to send response. Response sender has been closed.\n\nAt:\n"
        + frame("tb_decoupled", "sender", "execute")
    )
    logged = text.replace("\n", "\\n") + '"'
    wait_for(lambda: logged in server.log_text(), 10, "the sender's error in the server log")


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "mode,callee,what",
    [("bls_sync", "tb_callee_sync", "callee"), ("bls_async", "tb_callee_async", "async callee")],
)
def test_bls_callee_error_as_the_caller_sees_it(server, frame, protocol, mode, callee, what):
    result = infer(server, protocol, "tb_sync", {"MODE": bytes_input(mode)})
    assert text_output(result, "MSG") == failed(callee) + raised(callee, what, frame)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bls_callee_error_reraised_by_the_caller(server, frame, protocol):
    error = infer_error(server, protocol, "tb_sync", {"MODE": bytes_input("bls_reraise")})
    callee = failed("tb_callee_sync") + raised("tb_callee_sync", "callee", frame)
    assert error.message == (
        failed("tb_sync")
        + f"TritonModelException: {callee}\n\nAt:\n"
        + frame("tb_sync", "reraise", "execute")
    )


def test_initialize_error_ends_at_the_models_frame(server, frame):
    message = load_error(server, "tb_init")
    assert message == (
        "load failed for model 'tb_init': version 1 is at UNAVAILABLE state: Internal: "
        "RuntimeError: initialize boom\n\nAt:\n"
        + frame("tb_init", "fail", "fail")
        + frame("tb_init", "initialize", "initialize")
        + ";\n"
    )


def test_sys_exit_in_initialize_fails_the_load(server, frame):
    message = load_error(server, "tb_init_exit")
    assert message == (
        "load failed for model 'tb_init_exit': version 1 is at UNAVAILABLE state: Internal: "
        "SystemExit: 2\n\nAt:\n" + frame("tb_init_exit", "initialize", "initialize") + ";\n"
    )


def test_finalize_error_ends_at_the_models_frame(server, frame):
    unload(server, "tb_finalize")
    text = (
        "RuntimeError: finalize boom\n\nAt:\n"
        + frame("tb_finalize", "fail", "fail")
        + frame("tb_finalize", "finalize", "finalize")
    )
    logged = text.replace("\n", "\\n") + '"'
    wait_for(lambda: logged in server.log_text(), 10, "finalize's error in the server log")
