"""``TritonSecurityConfig`` (PyTriton 0.7's ``pytriton.triton.TritonSecurityConfig``): an
access token that tritonserver requires on the restricted endpoints
(``--http-restricted-api`` / ``--grpc-restricted-protocol``), with PyTriton's defaults."""

from __future__ import annotations

import dataclasses
import secrets
from typing import Dict, List, Optional

from .exceptions import PyTritonValidationError

#: The endpoint groups tritonserver 2.51 can restrict.
VALID_TRITON_ENDPOINTS = frozenset(
    {
        "health",
        "metadata",
        "inference",
        "shared-memory",
        "model-config",
        "model-repository",
        "statistics",
        "trace",
        "logging",
    }
)

#: What PyTriton protects when no endpoint list is given: the control endpoints.
DEFAULT_PROTECTED_ENDPOINTS = [
    "shared-memory",
    "model-repository",
    "statistics",
    "trace",
    "logging",
]

#: The header tritonserver checks (HTTP); gRPC clients send it with GRPC_HEADER_PREFIX.
TRITON_ACCESS_HEADER = "triton-access-token"
GRPC_HEADER_PREFIX = "triton-grpc-protocol-"


@dataclasses.dataclass
class TritonSecurityConfig:
    """restricted_endpoints None: DEFAULT_PROTECTED_ENDPOINTS; [] restricts nothing.
    access_token None (with endpoints to protect): a random one, see
    ``Triton.get_access_token()``."""

    access_token: Optional[str] = None
    restricted_endpoints: Optional[List[str]] = None

    def __post_init__(self) -> None:
        if self.restricted_endpoints is None:
            self.restricted_endpoints = list(DEFAULT_PROTECTED_ENDPOINTS)
        invalid = set(self.restricted_endpoints) - VALID_TRITON_ENDPOINTS
        if invalid:
            raise PyTritonValidationError(
                f"Invalid endpoint names: {', '.join(sorted(invalid))}. Valid endpoints are: "
                f"{', '.join(sorted(VALID_TRITON_ENDPOINTS))}"
            )
        if self.access_token is None and self.restricted_endpoints:
            self.access_token = secrets.token_urlsafe(32)

    @property
    def active(self) -> bool:
        return bool(self.access_token and self.restricted_endpoints)

    def server_args(self) -> List[str]:
        """The tritonserver options that restrict the endpoints (none when inactive)."""
        if not self.active:
            return []
        assert self.restricted_endpoints is not None
        value = f"{','.join(self.restricted_endpoints)}:{TRITON_ACCESS_HEADER}={self.access_token}"
        return [f"--http-restricted-api={value}", f"--grpc-restricted-protocol={value}"]


def auth_headers(access_token: Optional[str], protocol: str) -> Dict[str, str]:
    """The header that carries the token, as each protocol names it (PyTriton's
    ``create_auth_headers``); empty without a token."""
    if not access_token:
        return {}
    if protocol == "grpc":
        return {GRPC_HEADER_PREFIX + TRITON_ACCESS_HEADER: access_token}
    return {TRITON_ACCESS_HEADER: access_token}
