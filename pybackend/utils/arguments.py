"""How pb_utils takes its arguments: the conversions of the original's pybind11 binding, in
one place (issue 27). Every public callable of pb_utils converts each argument here.

The original is a C++ extension; pybind11 converts each Python argument to the C++ type of
the binding's parameter, and an argument it cannot convert makes the call fail with
``TypeError: <function>(): incompatible function arguments`` before any code of the
backend runs. The rules, as pybind11 applies them (its "convert" pass, the one a
single-overload function gets):

* a string (``std::string``) takes ``str`` or ``bytes`` (subclasses included, so
  ``numpy.str_`` and ``numpy.bytes_``); bytes are decoded as UTF-8.
* an integer takes an ``int`` (``bool`` included) or anything with ``__index__`` (numpy
  integers); a Python ``float`` (``numpy.float64`` is one) is refused, but another number
  (``numpy.float32``, ``numpy.bool_``) is truncated with ``int()``. An unsigned integer
  refuses negative values, and every integer refuses values out of its C++ range.
* a float takes anything ``float()`` takes from a number (ints, bools, numpy scalars).
* a bool takes ``True``/``False``, ``numpy.bool_`` and any number (by its truth value);
  not None, strings or containers.
* a vector takes any sequence that is not a string or bytes (list, tuple, ndarray), its
  elements converted by the element's rule.
* an object of a bound class (a Tensor, a TritonError, an enum member) takes an instance
  of that class only (plain ints are not enum members); inside a vector, ``None`` is let
  through for the binding to refuse with its own text.

Arguments the binding declares without names are positional-only (``/``): Python's own
TypeError for a keyword stands for pybind11's, as it does for a missing or extra argument.

Where the binding takes a plain Python object and checks it itself, the callable keeps
its own check and the original's text (e.g. "Correlation ID must be integer or string");
the casts such a body makes (``py::cast``) fail with pybind11's RuntimeError
(:func:`cast_in_body`) or, for ``py::bytes``, its TypeError (:func:`as_bytes`).
tests/conformance/argument_validation runs every callable against the original with every
kind of value and compares.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Dict, List, Optional, Type, TypeVar

T = TypeVar("T")

_INT_RANGES = {
    "int32": (-(1 << 31), (1 << 31) - 1),
    "int64": (-(1 << 63), (1 << 63) - 1),
    "uint32": (0, (1 << 32) - 1),
    "uint64": (0, (1 << 64) - 1),
}


def refuse(function: str, argument: str, expected: str, value: Any) -> TypeError:
    """The TypeError of an argument the binding cannot convert. The phrase is pybind11's;
    the rest says which argument, what it takes and what it got."""
    return TypeError(
        f"{function}(): incompatible function arguments. Argument '{argument}' takes "
        f"{expected}, got {type(value).__name__} {_short_repr(value)}."
    )


def _short_repr(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def as_string(value: Any, function: str, argument: str) -> str:
    """``std::string``: str, or bytes decoded as UTF-8."""
    if type(value) is str:
        return value
    if isinstance(value, str):
        return str(value)  # a plain str, also for numpy.str_
    if isinstance(value, bytes):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise refuse(function, argument, "str or UTF-8 bytes", value) from None
    raise refuse(function, argument, "str or bytes", value)


def as_optional_string(value: Any, function: str, argument: str) -> Optional[str]:
    return None if value is None else as_string(value, function, argument)


def _is_number(value: Any) -> bool:
    """CPython's PyNumber_Check: the type converts with int() or float()."""
    kind = type(value)
    return any(hasattr(kind, m) for m in ("__index__", "__int__", "__float__"))


def as_int(value: Any, function: str, argument: str, ctype: str = "int64") -> int:
    """A C++ integer of type ``ctype`` (int32, int64, uint32, uint64)."""
    low, high = _INT_RANGES[ctype]
    if type(value) is int and low <= value <= high:
        return value  # the common case, decided as below, without the other checks
    expected = "a non-negative int" if low == 0 else "an int"
    if isinstance(value, float) or value is None or isinstance(value, (str, bytes)):
        raise refuse(function, argument, expected, value)
    if isinstance(value, int):
        number = int(value)
    else:
        try:
            number = operator.index(value)
        except TypeError:
            if not _is_number(value):
                raise refuse(function, argument, expected, value) from None
            try:
                number = int(value)
            except (TypeError, ValueError, OverflowError):
                raise refuse(function, argument, expected, value) from None
    if not low <= number <= high:
        raise refuse(function, argument, f"{expected} that fits {ctype}", value)
    return number


def as_float(value: Any, function: str, argument: str) -> float:
    """A C++ double: anything float() takes from a number."""
    if value is None or isinstance(value, (str, bytes)) or not _is_number(value):
        raise refuse(function, argument, "a float or an int", value)
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        raise refuse(function, argument, "a float or an int", value) from None


def as_bool(value: Any, function: str, argument: str) -> bool:
    """A C++ bool: True/False, numbers by their truth value."""
    if value is True or value is False:
        return value
    if value is None or isinstance(value, (str, bytes)) or not _is_number(value):
        raise refuse(function, argument, "a bool", value)
    return bool(value)


def as_instance(value: Any, kind: Type[T], function: str, argument: str, what: str = "") -> T:
    """An object of a bound class: an instance of ``kind`` only."""
    if not isinstance(value, kind):
        raise refuse(function, argument, what or kind.__name__, value)
    return value


def as_optional_instance(
    value: Any, kind: Type[T], function: str, argument: str, what: str = ""
) -> Optional[T]:
    return None if value is None else as_instance(value, kind, function, argument, what)


def is_sequence(value: Any) -> bool:
    """pybind11's vector rule: a sequence that is not str, bytes or a mapping."""
    if isinstance(value, (str, bytes, bytearray, dict)):
        return False
    kind = type(value)
    return hasattr(kind, "__getitem__") and hasattr(kind, "__len__")


def as_list(
    value: Any,
    function: str,
    argument: str,
    element: Callable[[Any], T],
    expected: str,
) -> List[T]:
    """A ``std::vector``: a sequence, each element converted by ``element`` (which raises
    TypeError for one it cannot convert)."""
    if not is_sequence(value):
        raise refuse(function, argument, expected, value)
    try:
        return [element(item) for item in value]
    except TypeError:
        raise refuse(function, argument, expected, value) from None


def as_string_list(value: Any, function: str, argument: str) -> List[str]:
    if type(value) is list:
        # The common case (a BLS call's output names), without a call per element.
        for item in value:
            if type(item) is not str:
                break
        else:
            return list(value)
    return as_list(
        value,
        function,
        argument,
        lambda item: as_string(item, function, argument),
        "a list of str",
    )


def as_instance_list(
    value: Any, kind: Type[T], function: str, argument: str, what: str
) -> List[Optional[T]]:
    """A vector of bound objects; a None element is kept (pybind11 hands the binding a
    null pointer, which it refuses with its own text)."""
    if type(value) is list:
        # The common case, without a call per element (hot path: a loop, not all() over a
        # generator, which costs a frame per call).
        for item in value:
            if type(item) is not kind:
                break
        else:
            return list(value)

    def element(item: Any) -> Optional[T]:
        return None if item is None else as_instance(item, kind, function, argument, what)

    return as_list(value, function, argument, element, f"a list of {what}")


# pybind11's text when ``py::cast`` fails inside a binding's body (release builds).
CAST_ERROR = (
    "Unable to cast Python instance to C++ type (#define PYBIND11_DETAILED_ERROR_MESSAGES or "
    "compile in debug mode for details)"
)


def cast_in_body(value: Any, rule: Callable[[Any, str, str], T]) -> T:
    """``py::cast<T>(value)`` in a binding's body: the argument ``rule``, but a value it
    refuses raises pybind11's RuntimeError, not the TypeError of a call."""
    try:
        return rule(value, "", "")
    except TypeError:
        raise RuntimeError(CAST_ERROR) from None


def as_bytes(value: Any) -> bytes:
    """``py::bytes`` cast in a binding's body (bytes only, with pybind11's text)."""
    if not isinstance(value, bytes):
        raise TypeError(f"Object of type '{type(value).__name__}' is not an instance of 'bytes'")
    return bytes(value)


def expect_dict(value: Any) -> Dict[Any, Any]:
    """A ``py::dict`` argument the binding checks itself; the text is the original's, C++
    type name included (TritonModelException, like every error of the binding's body)."""
    if not isinstance(value, dict):
        from .errors import TritonModelException

        raise TritonModelException(f"Expect N8pybind114dictE, got {type(value)}")
    return value
