"""PyTriton's clients (``pytriton.client``) as a thin layer over tritonclient: the same
classes, arguments and results; numpy in, dicts of numpy out. The blocking clients are in
sync_clients.py, decoupled_client.py and futures_client.py, the asyncio ones (built on
them) in asyncio_clients.py; test_client_signatures.py holds them to PyTriton's."""

from __future__ import annotations

from .asyncio_clients import AsyncioDecoupledModelClient, AsyncioModelClient
from .decoupled_client import DecoupledModelClient
from .exceptions import (
    PyTritonClientClosedError,
    PyTritonClientError,
    PyTritonClientInferenceServerError,
    PyTritonClientInvalidUrlError,
    PyTritonClientModelDoesntSupportBatchingError,
    PyTritonClientModelUnavailableError,
    PyTritonClientQueueFullError,
    PyTritonClientTimeoutError,
    PyTritonClientValueError,
)
from .futures_client import FuturesModelClient
from .sync_clients import DEFAULT_GRPC_PORT as DEFAULT_GRPC_PORT
from .sync_clients import DEFAULT_HTTP_PORT as DEFAULT_HTTP_PORT
from .sync_clients import Inputs as Inputs
from .sync_clients import ModelClient
from .sync_clients import parse_url as parse_url

__all__ = [
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
    "PyTritonClientError",
    "PyTritonClientValueError",
    "PyTritonClientInvalidUrlError",
    "PyTritonClientTimeoutError",
    "PyTritonClientModelUnavailableError",
    "PyTritonClientClosedError",
    "PyTritonClientModelDoesntSupportBatchingError",
    "PyTritonClientInferenceServerError",
    "PyTritonClientQueueFullError",
]
