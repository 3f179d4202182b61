"""PyTriton's constants (``pytriton.constants``), same names and values, so code that
imports them (PyTriton's own examples do: ``CREATE_TRITON_CLIENT_TIMEOUT_S``,
``DEFAULT_TRITON_STARTUP_TIMEOUT_S``) runs with the prefix changed."""

from __future__ import annotations

import os
import pathlib

DEFAULT_HTTP_PORT = 8000
DEFAULT_GRPC_PORT = 8001
DEFAULT_METRICS_PORT = 8002
TRITON_LOCAL_IP = "127.0.0.1"
TRITON_CONTEXT_FIELD_NAME = "triton_context"
TRITON_PYTHON_BACKEND_INTERPRETER_DIRNAME = "python_backend_interpreter"
DEFAULT_TRITON_STARTUP_TIMEOUT_S = 120
CREATE_TRITON_CLIENT_TIMEOUT_S = 10


def _pytriton_home() -> pathlib.Path:
    # PyTriton's rule: $PYTRITON_HOME, else $XDG_CACHE_HOME/pytriton, else ~/.cache/pytriton;
    # variables and ~ expanded. Nothing here writes there; it is only named.
    default = os.path.join(os.getenv("XDG_CACHE_HOME", "$HOME/.cache"), "pytriton")
    home = os.path.expanduser(os.path.expandvars(os.getenv("PYTRITON_HOME", default)))
    return pathlib.Path(home).resolve().absolute()


PYTRITON_HOME = _pytriton_home()
