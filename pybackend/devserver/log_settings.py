"""tritonserver's logging extension (``/v2/logging``, gRPC ``LogSettings``) for the
development server: the settings a client reads and changes, and which of the models'
``pb_utils.Logger`` records are shown (INFO, WARNING and ERROR by their switches, VERBOSE
only from ``log_verbose_level`` 1, as tritonserver starts with level 0). The checks and
texts are tritonserver 2.51's (tests/devserver/test_log_settings_differential.py)."""

from __future__ import annotations

import threading
from typing import Any, Dict, Mapping

from ..utils.errors import ErrorCode
from .errors import ServeError

FORMATS = ("default", "ISO8601")
_SWITCHES = {0: "log_info", 1: "log_warning", 2: "log_error"}  # pb_utils.Logger levels


class LogSettings:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: Dict[str, Any] = {
            "log_file": "",
            "log_info": True,
            "log_warning": True,
            "log_error": True,
            "log_verbose_level": 0,
            "log_format": "default",
        }

    def snapshot(self) -> Dict[str, Any]:
        with self._lock:
            return dict(self._values)

    def shows(self, level: int) -> bool:
        """Whether a model's log record of ``level`` (0 INFO ... 3 VERBOSE) is shown."""
        with self._lock:
            if level in _SWITCHES:
                return bool(self._values[_SWITCHES[level]])
            return int(self._values["log_verbose_level"]) > 0

    def update(self, changes: Mapping[str, Any], grpc: bool = False) -> Dict[str, Any]:
        """Applies ``changes`` (JSON values; gRPC's setting values already unpacked) and
        returns the settings; raises :class:`ServeError` with tritonserver's text, changing
        nothing, where it refuses one. Unknown keys are ignored, as by tritonserver."""
        new: Dict[str, Any] = {}
        if "log_file" in changes:
            raise ServeError(
                "log file location can not be updated through network protocol",
                ErrorCode.UNSUPPORTED,
            )
        for key in ("log_info", "log_warning", "log_error"):
            if key in changes:
                value = changes[key]
                if not isinstance(value, bool) and not (grpc and isinstance(value, int)):
                    raise ServeError(
                        "attempt to access JSON non-boolean as boolean", ErrorCode.INTERNAL
                    )
                new[key] = bool(value)
        if "log_verbose_level" in changes:
            level = changes["log_verbose_level"]
            if isinstance(level, bool) or not isinstance(level, int) or level < 0:
                raise ServeError(
                    "attempt to access JSON non-unsigned-integer as unsigned-integer",
                    ErrorCode.INTERNAL,
                )
            new["log_verbose_level"] = level
        if "log_format" in changes:
            fmt = changes["log_format"]
            if not isinstance(fmt, str):
                raise ServeError("attempt to access JSON non-string as string", ErrorCode.INTERNAL)
            if fmt not in FORMATS:
                # tritonserver's two front ends word and classify this one differently.
                if grpc:
                    raise ServeError(
                        f"invalid argument for log_format, got: {fmt}", ErrorCode.INVALID_ARG
                    )
                raise ServeError(
                    f"invalid argument for --log_format, got: {fmt}", ErrorCode.UNAVAILABLE
                )
            new["log_format"] = fmt
        with self._lock:
            self._values.update(new)
            return dict(self._values)
