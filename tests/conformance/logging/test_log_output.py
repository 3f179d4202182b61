"""pb_utils.Logger at every level with file:line, and the stub's own output, in the server
log (spec 3.2 Logger; UV-25 for where we go further)."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer
from conformance_support.control import http_client, load, load_error, unload, wait_for
from conformance_support.sources import marker_line

LEVEL_CASES = [
    # (marker in model.py, message suffix, server log level letter)
    ("log_info", "log_info", "I"),
    ("log_warn", "log_warn", "W"),
    ("log_error", "log_error", "E"),
    ("log_verbose", "log_verbose", "I"),  # verbose messages are printed as I
    ("log_INFO", "log INFO", "I"),
    ("log_WARNING", "log WARNING", "W"),
    ("log_ERROR", "log ERROR", "E"),
    ("log_VERBOSE", "log VERBOSE", "I"),
    ("log_default", "log default", "I"),  # Logger.log's default level is INFO
]
# "<L>MMDD hh:mm:ss.uuuuuu <pid> <file>:<line>] "<message>"" (the server's own format)
LINE = r"^{level}\d{{4}} \d\d:\d\d:\d\d\.\d{{6}} +\d+ {file}:{line}\] {message}$"


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["log_levels"], extra_args=["--log-verbose=1"]
    )
    with start as srv:
        infer(srv, "http", "log_levels", {"MODE": bytes_input("levels")})
        yield srv


def server_line(level: str, line: int, message: str, quoted: bool = True) -> re.Pattern[str]:
    text = re.escape(message)
    text = f'"{text}"' if quoted else rf'\s*"?{text}"?'
    return re.compile(LINE.format(level=level, file=r"model\.py", line=line, message=text), re.M)


def wait_for_log(server, pattern, timeout: float = 10.0) -> None:
    """Logging is asynchronous for the model; give the line a moment to reach the log."""
    compiled = pattern if isinstance(pattern, re.Pattern) else re.compile(re.escape(pattern))
    wait_for(lambda: compiled.search(server.log_text()), timeout, f"log line {compiled.pattern}")


@pytest.fixture(scope="module")
def model_file(feature_repository):
    return feature_repository.model_dir("log_levels") / "1" / "model.py"


@pytest.mark.parametrize("phase", ["initialize", "execute"])
@pytest.mark.parametrize("marker,suffix,level", LEVEL_CASES, ids=[c[0] for c in LEVEL_CASES])
def test_logger_level_file_and_line(server, model_file, phase, marker, suffix, level):
    line = marker_line(model_file, marker)
    wait_for_log(server, server_line(level, line, f"LOG-MARK {phase} {suffix}"))


def test_logger_keeps_the_order_of_calls(server):
    wait_for_log(server, "LOG-MARK execute log default")
    log = server.log_text()
    positions = [log.index(f"LOG-MARK execute {suffix}") for _, suffix, _ in LEVEL_CASES]
    assert positions == sorted(positions)


def test_logger_in_auto_complete_config(server, model_file):
    """Before the stub is fully up the original writes these to its stderr in the same
    "<L>MMDD time pid file:line]" shape; either form carries level, file and line."""
    for marker, level, text in [("ac_log_info", "I", "info"), ("ac_log_warn", "W", "warn")]:
        pattern = server_line(
            level, marker_line(model_file, marker), f"LOG-MARK auto_complete log_{text}", False
        )
        wait_for_log(server, pattern)


def test_verbose_messages_follow_the_log_verbose_setting(server, model_file):
    client = http_client(server)
    try:
        client.update_log_settings({"log_verbose_level": 0})
        infer(server, "http", "log_levels", {"MODE": bytes_input("verbose:hidden")})
        infer(server, "http", "log_levels", {"MODE": bytes_input("info:after-hidden")})
        wait_for_log(server, "LOG-MARK info:after-hidden")
        assert "LOG-MARK verbose:hidden" not in server.log_text()
    finally:
        client.update_log_settings({"log_verbose_level": 1})
        client.close()
    infer(server, "http", "log_levels", {"MODE": bytes_input("verbose:shown")})
    wait_for_log(server, "LOG-MARK verbose:shown")


def test_logger_attributes_can_be_assigned(server, model_file):
    """PyTriton sets Logger.error = Logger.log_error; the alias logs at ERROR."""
    infer(server, "http", "log_levels", {"MODE": bytes_input("alias:x")})
    wait_for_log(server, server_line("E", marker_line(model_file, "alias"), "LOG-MARK alias:x"))


@pytest.mark.parametrize(
    "mode", ["print:flushed", "stderr:written", "logging:warning"], ids=lambda m: m.split(":")[0]
)
def test_stub_output_reaches_the_server_log(server, mode):
    infer(server, "http", "log_levels", {"MODE": bytes_input(mode)})
    wait_for_log(server, f"LOG-MARK {mode}")


def test_print_at_import_reaches_the_server_log(server):
    wait_for_log(server, "LOG-MARK print at import")


def test_finalize_logs_and_unflushed_output_appear_on_unload(server, feature_repository):
    model_file = feature_repository.model_dir("log_finalize") / "1" / "model.py"
    load(server, "log_finalize")
    try:
        infer(server, "http", "log_finalize", {"IN": np.array([1], np.int32)})
    finally:
        unload(server, "log_finalize")
    line = marker_line(model_file, "finalize")
    wait_for_log(server, server_line("W", line, "LOG-MARK finalize log_warn"))
    wait_for_log(server, "LOG-MARK unflushed print from execute")


# ----------------------------------------------------------------- UV-25 deviations
def _line_with(server, text: str) -> str:
    wait_for_log(server, text)
    return next(line for line in server.log_text().splitlines() if text in line)


@pytest.mark.deviation("UV-25: the original block-buffers stdout until the stub exits")
def test_unflushed_print_is_forwarded_promptly(server):
    infer(server, "http", "log_levels", {"MODE": bytes_input("print_unflushed:prompt")})
    wait_for_log(server, "LOG-MARK print_unflushed:prompt", timeout=5)


@pytest.mark.deviation("UV-25: the original passes stdout/stderr through without a prefix")
@pytest.mark.parametrize("mode", ["print:prefixed", "stderr:prefixed"], ids=["stdout", "stderr"])
def test_output_lines_name_model_and_instance(server, mode):
    infer(server, "http", "log_levels", {"MODE": bytes_input(mode)})
    line = _line_with(server, f"LOG-MARK {mode}")
    assert "log_levels_0" in line.split("LOG-MARK")[0], line


@pytest.mark.deviation("UV-25: the original leaves Python logging to its lastResort handler")
def test_python_logging_records_keep_their_level(server):
    infer(server, "http", "log_levels", {"MODE": bytes_input("logging:levelled")})
    line = _line_with(server, "LOG-MARK logging:levelled")
    assert line.startswith("W"), line


@pytest.mark.deviation("UV-25: Logger works at module import time")
def test_logger_at_import_time(server, feature_repository):
    model_file = feature_repository.model_dir("log_at_import") / "1" / "model.py"
    load(server, "log_at_import")
    unload(server, "log_at_import")
    line = marker_line(model_file, "import")
    wait_for_log(server, server_line("I", line, "LOG-MARK logged at import time", False))


@pytest.mark.deviation("pins that the original has no Logger at import time", backend="original")
def test_original_has_no_logger_at_import_time(server, feature_repository):
    message = load_error(server, "log_at_import")
    assert "AttributeError: module 'triton_python_backend_utils' has no attribute 'Logger'" in (
        message
    )
