"""PyTriton's access-token helpers (``pytriton.client.auth``): the header a token travels
in, per protocol, and the token found in such headers. The clients and ``Triton`` send
tokens with pybackend/pytriton/_security.py's ``auth_headers``, the same header names."""

from __future__ import annotations

from typing import Dict, Optional

from .._security import GRPC_HEADER_PREFIX, TRITON_ACCESS_HEADER

_GRPC_HEADER = GRPC_HEADER_PREFIX + TRITON_ACCESS_HEADER


def extract_access_token_from_headers(headers: Optional[Dict[str, str]]) -> Optional[str]:
    """The token in ``headers``, under the HTTP or the gRPC name (None when neither);
    ValueError when both are there and differ."""
    if not headers:
        return None
    http_token = headers.get(TRITON_ACCESS_HEADER)
    grpc_token = headers.get(_GRPC_HEADER)
    if http_token is not None and grpc_token is not None and http_token != grpc_token:
        raise ValueError(
            f"Conflicting authentication headers found: '{TRITON_ACCESS_HEADER}' and "
            f"'{_GRPC_HEADER}' contain different tokens. Please use consistent tokens."
        )
    return http_token or grpc_token


def create_auth_headers(access_token: Optional[str], protocol: str) -> Dict[str, str]:
    """``{"triton-access-token": token}`` for "http", the gRPC metadata name for "grpc"
    (any case); ValueError without a token or for another protocol."""
    if not access_token:
        raise ValueError("access_token cannot be None or empty")
    protocol = protocol.lower()
    if protocol not in ("http", "grpc"):
        raise ValueError(f"Invalid protocol '{protocol}'. Must be 'http' or 'grpc'")
    return {TRITON_ACCESS_HEADER if protocol == "http" else _GRPC_HEADER: access_token}
