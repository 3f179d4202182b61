"""Raw HTTP exchanges for the differential tests: what a client sends, and the parts of the
answer that must be the same from the development server and from tritonserver."""

from __future__ import annotations

import http.client
import json
from typing import Any, Dict, Optional, Tuple


def exchange(
    url: str,
    method: str,
    path: str,
    body: bytes = b"",
    headers: Optional[Dict[str, str]] = None,
) -> Tuple[int, Any]:
    """(status, comparable body): JSON parsed; a binary response as (header JSON, bytes)."""
    host, port = url.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=60)
    try:
        conn.request(method, path, body=body or None, headers=headers or {})
        resp = conn.getresponse()
        data = resp.read()
        split = resp.getheader("Inference-Header-Content-Length")
    finally:
        conn.close()
    if split is not None:
        n = int(split)
        return resp.status, (json.loads(data[:n]), data[n:])
    if not data:
        return resp.status, None
    try:
        # tritonserver writes strings that are not UTF-8 as their raw bytes
        return resp.status, json.loads(data.decode("utf-8", "surrogateescape"))
    except ValueError:
        return resp.status, data


def infer_body(header: Dict[str, Any], *blobs: bytes) -> Tuple[bytes, Dict[str, str]]:
    """A request body and its headers: JSON alone, or JSON then binary tensors."""
    head = json.dumps(header).encode()
    if not blobs:
        return head, {"Content-Type": "application/json"}
    return head + b"".join(blobs), {"Inference-Header-Content-Length": str(len(head))}
