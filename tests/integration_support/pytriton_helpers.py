"""Helpers of tests/pytriton: a TritonConfig on free loopback ports, the urls of a running
Triton as PyTriton's clients take them, an app process's "ready" line."""

from __future__ import annotations

import subprocess

from pybackend.pytriton.triton import Triton, TritonConfig
from pybackend.server.processes import free_ports


def loopback_config(**extra: object) -> TritonConfig:
    http, grpc, metrics = free_ports(3, "127.0.0.1")
    return TritonConfig(
        http_address="127.0.0.1",
        grpc_address="127.0.0.1",
        metrics_address="127.0.0.1",
        http_port=http,
        grpc_port=grpc,
        metrics_port=metrics,
        **extra,  # type: ignore[arg-type]
    )


def urls(t: Triton) -> tuple[str, str]:
    """(http url, grpc url) of a running Triton, as PyTriton's clients take them."""
    server = t.server
    assert server is not None
    return f"http://{server.http_url}", f"grpc://{server.grpc_url}"


def wait_for_line(proc: subprocess.Popen, marker: str) -> str | None:
    """Reads ``proc``'s text stdout up to a line that is ``marker``: None once it is seen,
    else (the process ended first) everything it printed, for the failure message."""
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if line.strip() == marker:
            return None
    return "".join(lines)
