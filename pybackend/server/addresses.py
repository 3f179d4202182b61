"""Listening addresses, IPv4 or IPv6: the socket family a host needs, the address a client
on this machine reaches a listener on, and ``host:port`` as URLs and gRPC targets write it
(an IPv6 address in brackets). tritonserver listens on either (``--http-address=::``); so do
our launcher and the OpenAI endpoint."""

from __future__ import annotations

import socket

#: Listening on every address -> the loopback address a local client uses instead.
_LOOPBACK = {"": "127.0.0.1", "0.0.0.0": "127.0.0.1", "::": "::1"}


def bare(host: str) -> str:
    """``host`` without the brackets a URL puts around an IPv6 address (``[::1]`` -> ``::1``):
    the launcher and the endpoint take either."""
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def family(host: str) -> socket.AddressFamily:
    """AF_INET6 for an IPv6 address (``::1``, ``::``), AF_INET for the rest (IPv4 addresses
    and host names, which resolve to IPv4 as before)."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def local(host: str) -> str:
    """Where a client on this machine reaches a listener on ``host``."""
    return _LOOPBACK.get(host, host)


def joined(host: str, port: int) -> str:
    """``host:port``; ``[host]:port`` for an IPv6 address."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def triton_http_address(host: str) -> str:
    """``host`` as tritonserver 2.51's ``--http-address`` and ``--metrics-address`` take it:
    an IPv6 address as ``ipv6:ADDR`` (a bare one makes its HTTP library listen on
    255.255.255.255, IPv4: seen here)."""
    return f"ipv6:{host}" if ":" in host else host


def triton_grpc_address(host: str) -> str:
    """``host`` as ``--grpc-address`` takes it: an IPv6 address in brackets (a bare one is
    joined with the port as ``::1:8001``, which gRPC refuses and tritonserver exits)."""
    return f"[{host}]" if ":" in host else host
