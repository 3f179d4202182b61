"""``pytriton.client.client``, the module PyTriton defines its clients in, for code that
imports them from there; they live in this package's other modules."""

from __future__ import annotations

from .asyncio_clients import AsyncioDecoupledModelClient, AsyncioModelClient
from .decoupled_client import DecoupledModelClient
from .futures_client import FuturesModelClient
from .sync_clients import DEFAULT_INFERENCE_TIMEOUT_S, ModelClient

__all__ = [
    "DEFAULT_INFERENCE_TIMEOUT_S",
    "AsyncioDecoupledModelClient",
    "AsyncioModelClient",
    "DecoupledModelClient",
    "FuturesModelClient",
    "ModelClient",
]
