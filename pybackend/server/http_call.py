"""One HTTP call to a tritonserver, with the standard library only (tritonclient is not
needed to start or stop a server): the launcher's readiness probe and unloads, and the
control calls of pybackend.pytriton."""

from __future__ import annotations

import http.client
from collections.abc import Mapping


def http_call(
    host: str,
    port: int,
    method: str,
    path: str,
    *,
    timeout: float,
    body: bytes | None = None,
    headers: Mapping[str, str] | None = None,
) -> tuple[int, bytes] | None:
    """The answer's status and body; None when nothing answers in ``timeout`` seconds (a
    refused connection, a reset, a silent server)."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    sent = dict(headers or {})
    if body is not None:
        sent.setdefault("Content-Type", "application/json")
    try:
        conn.request(method, path, body=body, headers=sent)
        answer = conn.getresponse()
        return answer.status, answer.read()
    except (OSError, http.client.HTTPException):
        return None
    finally:
        conn.close()
