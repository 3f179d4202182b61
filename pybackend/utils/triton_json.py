"""Request parameters as the original backend hands them to ``request.parameters()``: the
JSON text Triton's TritonJson (rapidjson's Writer) makes of them. A double is written with
its shortest round-trip digits, placed by rapidjson's rules (``0.1``, ``2.0``,
``100000000000000000000.0``, ``1e-7``, ``1.5e22``); strings keep their UTF-8 unescaped.
csrc/backend/json.cc writes doubles by the same rules (the backend's side of it)."""

from __future__ import annotations

import json
import math
from typing import Any, Mapping, Optional


class ParameterTypeError(ValueError):
    """A parameter value the server refuses (tritonserver 2.51's text)."""


def parameter_type_error(key: str) -> ParameterTypeError:
    return ParameterTypeError(
        f"parameter '{key}' has invalid type. It should be either 'int', 'bool', or 'string'."
    )


def double_text(value: float) -> str:
    """``value`` as rapidjson's Writer writes a double (its Prettify rules), from the
    shortest digits that read back as ``value``."""
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = f"{abs(value)!r}".partition("e")
    whole, _, fraction = mantissa.partition(".")
    # value = digits × 10^k; kk = len(digits) + k places the decimal point
    # (10^(kk-1) <= value < 10^kk)
    digits = (whole + fraction).lstrip("0")
    k = int(exponent or 0) - len(fraction) + len(digits) - len(digits.rstrip("0"))
    digits = digits.rstrip("0")
    length = len(digits)
    kk = length + k
    if 0 <= k and kk <= 21:
        text = digits + "0" * k + ".0"
    elif 0 < kk <= 21:
        text = digits[:kk] + "." + digits[kk:]
    elif -6 < kk <= 0:
        text = "0." + "0" * -kk + digits
    elif length == 1:
        text = digits + "e" + str(kk - 1)
    else:
        text = digits[0] + "." + digits[1:] + "e" + str(kk - 1)
    return sign + text


def parameters_text(parameters: Optional[Mapping[str, Any]]) -> str:
    """``parameters`` as the model's ``request.parameters()`` shows them under the server
    (compact JSON in the order given); a value the server refuses (not a bool, int, float
    or str) raises :class:`ParameterTypeError` with its text."""
    items = []
    for key, value in dict(parameters or {}).items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, int):
            text = str(value)
        elif isinstance(value, float):
            text = double_text(value)
        elif isinstance(value, str):
            text = _string(value)
        else:
            raise parameter_type_error(key)
        items.append(f"{_string(str(key))}:{text}")
    return "{" + ",".join(items) + "}"


def _string(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)
