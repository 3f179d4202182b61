"""pybackend.utils.arguments: pybind11's conversions, value by value (the argument matrix in
tests/conformance/argument_validation measures them against the original; these pin the
rules without a server, so a change shows here first)."""

from __future__ import annotations

import enum
from typing import Any

import numpy as np
import pytest

from pybackend.utils import arguments as args

REFUSED = pytest.raises(TypeError, match="incompatible function arguments")


@pytest.mark.parametrize(
    "value,expected",
    [("m", "m"), (b"m", "m"), (np.bytes_(b"m"), "m"), (np.str_("m"), "m"), ("é".encode(), "é")],
)
def test_string_takes_str_and_bytes(value: Any, expected: str) -> None:
    converted = args.as_string(value, "f", "name")
    assert converted == expected and type(converted) is str


@pytest.mark.parametrize("value", [None, 1, True, 1.0, ["m"], ("m",), {"k": "v"}, np.int64(1)])
def test_string_refuses_the_rest(value: Any) -> None:
    with REFUSED:
        args.as_string(value, "f", "name")


@pytest.mark.parametrize(
    "value,expected",
    [(3, 3), (True, 1), (np.int32(3), 3), (np.int64(3), 3), (np.float32(3.7), 3), (np.bool_(1), 1)],
)
def test_int_takes_ints_and_non_float_numbers(value: Any, expected: int) -> None:
    converted = args.as_int(value, "f", "flags")
    assert converted == expected and type(converted) is int


@pytest.mark.parametrize("value", [None, 1.0, np.float64(1.0), "1", b"1", [1], (1,), {}])
def test_int_refuses_python_floats_strings_and_containers(value: Any) -> None:
    with REFUSED:
        args.as_int(value, "f", "flags")


def test_int_ranges() -> None:
    assert args.as_int((1 << 64) - 1, "f", "timeout", "uint64") == (1 << 64) - 1
    with REFUSED:
        args.as_int(-1, "f", "flags", "uint32")
    with REFUSED:
        args.as_int(1 << 32, "f", "flags", "uint32")
    assert args.as_int(-1, "f", "model_version", "int64") == -1


@pytest.mark.parametrize("value", [1, True, 1.5, np.float32(1.5), np.float64(1.5), np.int64(2)])
def test_float_takes_numbers(value: Any) -> None:
    assert args.as_float(value, "f", "value") == float(value)


@pytest.mark.parametrize("value", [None, "1", b"1", [1.0], (1.0,), {}])
def test_float_refuses_the_rest(value: Any) -> None:
    with REFUSED:
        args.as_float(value, "f", "value")


@pytest.mark.parametrize(
    "value,expected", [(True, True), (0, False), (2.5, True), (np.bool_(False), False)]
)
def test_bool_takes_numbers_by_truth(value: Any, expected: bool) -> None:
    assert args.as_bool(value, "f", "decoupled") is expected


@pytest.mark.parametrize("value", [None, "True", b"", [], (), {}])
def test_bool_refuses_none_strings_and_containers(value: Any) -> None:
    with REFUSED:
        args.as_bool(value, "f", "decoupled")


def test_string_list_takes_sequences_but_not_a_string() -> None:
    assert args.as_string_list(("a", b"b"), "f", "names") == ["a", "b"]
    assert args.as_string_list(np.array(["a"]), "f", "names") == ["a"]
    for value in ("ab", b"ab", None, {"a": 1}, {"a"}, [None], ["a", 1]):
        with REFUSED:
            args.as_string_list(value, "f", "names")


def test_instance_list_keeps_none_for_the_binding_to_refuse() -> None:
    assert args.as_instance_list([1, None], int, "f", "inputs", "int") == [1, None]
    with REFUSED:
        args.as_instance_list(["x"], int, "f", "inputs", "int")


class Color(enum.IntEnum):
    RED = 0


def test_enum_takes_members_only() -> None:
    assert args.as_instance(Color.RED, Color, "f", "kind") is Color.RED
    for value in (0, None, np.int64(0), "RED"):
        with REFUSED:
            args.as_instance(value, Color, "f", "kind")


def test_casts_in_a_binding_body() -> None:
    assert args.cast_in_body(np.float32(2), args.as_float) == 2.0
    with pytest.raises(RuntimeError, match="Unable to cast Python instance to C"):
        args.cast_in_body(None, args.as_float)
    with pytest.raises(TypeError, match="Object of type 'str' is not an instance of 'bytes'"):
        args.as_bytes("x")
    with pytest.raises(Exception, match=r"Expect N8pybind114dictE, got <class 'list'>"):
        args.expect_dict([])
