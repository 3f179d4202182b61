"""pb_utils.Logger: levels, caller location, stderr format, attribute assignment."""

from __future__ import annotations

import os
import re

import pytest

import triton_python_backend_utils as pb_utils
from pybackend.utils import transport


class Recorder(transport.Transport):
    def __init__(self) -> None:
        self.records: list = []

    def log(self, level, filename, line, message):
        self.records.append((level, os.path.basename(filename), line, message))


@pytest.fixture()
def rec():
    r = Recorder()
    previous = transport.set_transport(r)
    yield r
    transport.set_transport(previous)


def test_levels_and_caller_location(rec: Recorder) -> None:
    pb_utils.Logger.log_info("i")
    pb_utils.Logger.log_warn("w")
    pb_utils.Logger.log_error("e")
    pb_utils.Logger.log_verbose("v")
    pb_utils.Logger.log("x", pb_utils.Logger.ERROR)
    pb_utils.Logger.log("d")
    assert [(lvl, m) for lvl, _, _, m in rec.records] == [
        (0, "i"),
        (1, "w"),
        (2, "e"),
        (3, "v"),
        (2, "x"),
        (0, "d"),
    ]
    assert {f for _, f, _, _ in rec.records} == {"test_pb_logger.py"}
    lines = [ln for _, _, ln, _ in rec.records]
    assert lines == sorted(lines) and len(set(lines)) == 6
    assert (
        pb_utils.Logger.INFO,
        pb_utils.Logger.WARNING,
        pb_utils.Logger.ERROR,
        pb_utils.Logger.VERBOSE,
    ) == (
        0,
        1,
        2,
        3,
    )


def test_attribute_assignment(rec: Recorder) -> None:
    pb_utils.Logger.error = pb_utils.Logger.log_error
    try:
        pb_utils.Logger.error("via alias")
        assert rec.records[-1][0] == 2
    finally:
        del pb_utils.Logger.error


def test_stderr_format(capsys: pytest.CaptureFixture) -> None:
    previous = transport.set_transport(transport.InProcessTransport())
    try:
        pb_utils.Logger.log_warn("hello  world")
    finally:
        transport.set_transport(previous)
    err = capsys.readouterr().err
    assert re.fullmatch(
        r"W\d{4} \d\d:\d\d:\d\d\.\d{6} "
        + str(os.getpid())
        + r" test_pb_logger\.py:\d+\]  hello  world\n",
        err,
    ), err
