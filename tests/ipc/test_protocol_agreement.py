"""csrc/ipc/protocol.h and pybackend/ipc/protocol.py must define the same constants."""

from __future__ import annotations

import enum
import re
from pathlib import Path

from pybackend.ipc import protocol

HEADER = Path(__file__).resolve().parents[2] / "csrc" / "ipc" / "protocol.h"

_CONSTEXPR = re.compile(r"constexpr\s+[\w:]+\s+(\w+)\s*=\s*(-?\w+)\s*;")
_ENUM = re.compile(r"enum\s+class\s+(\w+)[^{]*\{([^}]*)\}", re.S)
_MEMBER = re.compile(r"(\w+)\s*=\s*(-?\w+)")


def parse_header(text: str) -> dict:
    """{'NAME': value} for constexpr constants and {'Enum.NAME': value} for enum members."""
    text = re.sub(r"//[^\n]*", "", text)
    values = {name: int(v, 0) for name, v in _CONSTEXPR.findall(text)}
    for enum_name, body in _ENUM.findall(text):
        for name, v in _MEMBER.findall(body):
            values[f"{enum_name}.{name}"] = int(v, 0)
    return values


def python_constants() -> dict:
    values = {}
    for name in dir(protocol):
        obj = getattr(protocol, name)
        if name.isupper() and isinstance(obj, int) and not isinstance(obj, bool):
            values[name] = int(obj)
        elif (
            isinstance(obj, type)
            and issubclass(obj, enum.IntEnum)
            and obj.__module__ == protocol.__name__
        ):
            for member in obj:
                values[f"{name}.{member.name}"] = int(member)
    return values


def test_header_parses() -> None:
    values = parse_header(HEADER.read_text())
    assert values["PROTOCOL_VERSION"] >= 1
    assert values["MessageKind.HELLO"] == 1


def test_every_python_constant_is_in_the_header() -> None:
    cpp = parse_header(HEADER.read_text())
    py = python_constants()
    missing = sorted(set(py) - set(cpp))
    assert not missing, f"defined in protocol.py but not in protocol.h: {missing}"
    wrong = {k: (py[k], cpp[k]) for k in py if py[k] != cpp[k]}
    assert not wrong, f"values differ (python, c++): {wrong}"


def test_every_header_constant_is_in_python() -> None:
    cpp = parse_header(HEADER.read_text())
    py = python_constants()
    missing = sorted(set(cpp) - set(py))
    assert not missing, f"defined in protocol.h but not in protocol.py: {missing}"


def test_parser_sees_a_mismatch() -> None:
    version = protocol.PROTOCOL_VERSION
    text = HEADER.read_text().replace(f"PROTOCOL_VERSION = {version};", "PROTOCOL_VERSION = 99;")
    assert parse_header(text)["PROTOCOL_VERSION"] == 99


def test_header_struct_matches() -> None:
    assert protocol.HEADER.size == protocol.HEADER_SIZE == 16
