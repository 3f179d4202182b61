"""What the argument matrix passes and how it writes down what happened; shared by
argmatrix (which runs the table) and argprobe (which runs the response sender's rows).

Every argument of every callable is given each of VALUES in turn, the other arguments
keeping their valid value. A value is derived from the argument's valid value where that
keeps the call meaningful (the str value of a model name is that name, so bytes of it
really reach the server), so a row shows the conversion, not just "wrong type".
"""

import re

import numpy as np


def _text(valid):
    if isinstance(valid, str):
        return valid
    if isinstance(valid, bytes):
        return valid.decode()
    return "1"


def _number(valid):
    if type(valid) is int:
        return valid
    return 1


def _items(valid):
    if isinstance(valid, (list, tuple)):
        return list(valid)
    return [valid]


# name -> valid value -> the value given instead
VALUES = {
    "None": lambda valid: None,
    "str": _text,
    "bytes": lambda valid: _text(valid).encode(),
    "np.bytes_": lambda valid: np.bytes_(_text(valid).encode()),
    "np.str_": lambda valid: np.str_(_text(valid)),
    "int": _number,
    "bool": lambda valid: True,
    "float": lambda valid: float(_number(valid)),
    "np.int64": lambda valid: np.int64(_number(valid)),
    "np.int32": lambda valid: np.int32(_number(valid)),
    "np.float64": lambda valid: np.float64(_number(valid)),
    "np.float32": lambda valid: np.float32(_number(valid)),
    "np.bool_": lambda valid: np.bool_(True),
    "list": _items,
    "tuple": lambda valid: tuple(_items(valid)),
    "empty list": lambda valid: [],
    "list of None": lambda valid: [None],
    "dict": lambda valid: {"k": "v"},
}

# pybind11 writes its argument-conversion errors with the C++ signatures of the binding,
# which a clean-room implementation does not reproduce: the type and this phrase are the
# contract for those, the rest of the text is not compared.
PYBIND11_PHRASES = ("incompatible function arguments", "incompatible constructor arguments")
# What Python says where pybind11 says the above: arguments that do not fit the signature
# (a keyword for a positional-only argument, an unknown keyword, one missing or too many).
CALL_MISMATCH = re.compile(
    r"\(\) (got some positional-only arguments passed as keyword arguments"
    r"|got an unexpected keyword argument|missing \d+ required positional argument"
    r"|takes \d+ positional argument)"
)


# The original's stub runs numpy 1 (it breaks with numpy 2), ours may run numpy 2, which
# writes scalars as np.int64(1) and names np.bool_ "numpy.bool": texts are compared in
# numpy 1's spelling. Runs of spaces are compared as one (the original has texts with the
# indentation of a C++ line continuation inside them).
_NUMPY2_SCALAR = re.compile(r"np\.(?:True_|False_|\w+\((.*?)\))")


def _neutral(text):
    text = text.replace("numpy.bool'", "numpy.bool_'")
    text = _NUMPY2_SCALAR.sub(lambda m: m.group(1) or m.group(0)[3:-1], text)
    return re.sub(r" {2,}", " ", text)


def describe_error(exc):
    text = str(exc)
    pybind11 = any(p in text for p in PYBIND11_PHRASES) or CALL_MISMATCH.search(text)
    if isinstance(exc, TypeError) and pybind11:
        text = "<incompatible arguments>"
    return _neutral(f"{type(exc).__name__}: {text}")


def outcome(call, observe=None):
    """'ok' (with what ``observe`` reads back from the result) or 'Type: message'."""
    try:
        result = call()
    except Exception as exc:  # noqa: BLE001 - which exception is the finding
        return describe_error(exc)
    if observe is None:
        return "ok"
    try:
        return _neutral(f"ok {observe(result)!r}")
    except Exception as exc:  # noqa: BLE001
        return f"ok, then reading it back: {describe_error(exc)}"
