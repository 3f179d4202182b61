"""pb_utils' enums print as the original's pybind11 enums (pybackend/utils/pybind_enum.py;
the printed forms themselves are held to the original in
tests/conformance/execute_semantics/test_exec_returns.py) and stay ints everywhere else:
what our own code does with them (JSON, %d, a format spec, pickling, dict keys) is
unchanged."""

from __future__ import annotations

import json
import pickle

import pytest

from pybackend.utils.errors import ErrorCode
from pybackend.utils.logger import LogLevel
from pybackend.utils.memory import MemoryType
from pybackend.utils.metrics import MetricKind

MEMBERS = [*ErrorCode, *LogLevel, *MemoryType, *MetricKind]


@pytest.mark.parametrize("member", MEMBERS, ids=repr)
def test_a_member_is_still_its_number(member: int) -> None:
    number = int(member)
    assert json.dumps({"code": member}) == json.dumps({"code": number})
    assert "%d" % member == str(number)
    assert f"{member:>3}" == f"{number:>3}"
    assert pickle.loads(pickle.dumps(member)) is member
    assert {number: "x"}[member] == "x"
    assert member == number and hash(member) == hash(number)


def test_the_printed_type_names_are_the_originals() -> None:
    assert str(ErrorCode.NOT_FOUND) == "__ErrorCode.NOT_FOUND"
    assert repr(LogLevel.VERBOSE) == "<LogLevel.VERBOSE: 3>"
    assert f"{MetricKind.COUNTER}" == "MetricKind.COUNTER"
    assert format(MemoryType.TRITONSERVER_MEMORY_CPU, "") == "MemoryType.TRITONSERVER_MEMORY_CPU"
    assert all(bool(m) for m in MEMBERS)  # value 0 included, as a pybind11 enum object
