"""Run a real tritonserver with our backend (or the original one) for tests, benchmarks, serving."""

from pybackend.server.locate import (
    original_backend_dir,
    original_venv,
    our_backend_dir,
    tritonserver_binary,
)
from pybackend.server.tritonserver import ServerError, TritonServer

__all__ = [
    "ServerError",
    "TritonServer",
    "original_backend_dir",
    "original_venv",
    "our_backend_dir",
    "tritonserver_binary",
]
