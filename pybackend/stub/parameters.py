"""pybackend's own model config parameters (``PYBACKEND_*`` in config.pbtxt's
``parameters``) as the stub reads them: a value by key, a switch, and the error for a value
it cannot use. The execute path's modules read their parameters here (async_execute.py,
returns.py)."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional, Union

from .. import errors

#: A model config: its JSON text (as INIT carries it) or the parsed dict.
ModelConfig = Union[str, Mapping[str, Any]]


class ParameterError(errors.ConfigError, ValueError):
    """A ``PYBACKEND_*`` model config parameter with a value we cannot use (a ValueError,
    as the load failure it causes always was)."""


def parameter_value(model_config: ModelConfig, key: str) -> Optional[str]:
    """The string value of a model config parameter (None when unset)."""
    try:
        config = json.loads(model_config or "{}") if isinstance(model_config, str) else model_config
        params = config.get("parameters") or {}
    except ValueError:
        return None
    entry = params.get(key)
    if entry is None:
        return None
    return entry.get("string_value", "") if isinstance(entry, dict) else str(entry)


def switch_parameter(model_config: ModelConfig, key: str) -> bool:
    """A model config parameter that is on or off (false when unset); ParameterError for a
    value that is neither."""
    text = parameter_value(model_config, key)
    if text is None:
        return False
    value = text.strip().lower()
    if value in ("true", "yes", "on", "1"):
        return True
    if value in ("false", "no", "off", "0", ""):
        return False
    raise ParameterError(f"model config parameter {key} must be true or false, found {text!r}")
