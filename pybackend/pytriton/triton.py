"""PyTriton's ``pytriton.triton`` module: the server objects and their configuration, as
user code imports them. ``Triton`` is in ``_triton``, ``RemoteTriton`` (a ``Triton``) in
``_remote_triton``; both private modules import only downwards, so any of them can be
imported first."""

from ..server.tritonserver import ServerError
from ._remote_triton import RemoteTriton
from ._security import (
    DEFAULT_PROTECTED_ENDPOINTS,
    TRITON_ACCESS_HEADER,
    VALID_TRITON_ENDPOINTS,
    TritonSecurityConfig,
)
from ._triton import LOGGER, MONITORING_PERIOD_S, Triton
from ._triton_config import (
    DefaultTritonLifecyclePolicy,
    TritonConfig,
    TritonLifecyclePolicy,
    VertextAILifecyclePolicy,
)

__all__ = [
    "DEFAULT_PROTECTED_ENDPOINTS",
    "LOGGER",
    "MONITORING_PERIOD_S",
    "TRITON_ACCESS_HEADER",
    "VALID_TRITON_ENDPOINTS",
    "DefaultTritonLifecyclePolicy",
    "RemoteTriton",
    "ServerError",
    "Triton",
    "TritonConfig",
    "TritonLifecyclePolicy",
    "TritonSecurityConfig",
    "VertextAILifecyclePolicy",
]
