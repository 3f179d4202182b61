"""Unload an explicit-mode tritonserver's models before it is stopped.

tritonserver's shutdown unloads the models itself, but it checks whether they are gone only
once a second, so every stop costs at least a second. Unloaded beforehand (the repository
API), the shutdown finds nothing live and exits at once. Best effort and bounded: whatever is
still loaded when the time is up, the shutdown unloads as before.
"""

from __future__ import annotations

import http.client
import json
import time
from urllib.parse import quote

#: How long the models get to unload (finalize included) before the shutdown takes over.
UNLOAD_WAIT_S = 5.0
#: Per HTTP call: a frozen or busy server costs the stop no more than this.
_CALL_TIMEOUT_S = 0.5
#: States of a model still holding its instances (the index says UNAVAILABLE once unloaded).
_LIVE = ("READY", "LOADING", "UNLOADING")


def unload_models(host: str, port: int, wait_s: float = UNLOAD_WAIT_S) -> bool:
    """Ask the server at ``host:port`` (HTTP) to unload every model it has loaded and wait up
    to ``wait_s`` for them to be gone. True when none is left; False on any failure."""
    deadline = time.monotonic() + wait_s
    try:
        live = _live_models(host, port)
        for name in live:
            _post(host, port, f"/v2/repository/models/{quote(name)}/unload")
        while live:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
            live = _live_models(host, port)
        return True
    except (OSError, ValueError, http.client.HTTPException):
        return False


def _live_models(host: str, port: int) -> list[str]:
    index = json.loads(_post(host, port, "/v2/repository/index"))
    return sorted({entry["name"] for entry in index if entry.get("state") in _LIVE})


def _post(host: str, port: int, path: str) -> bytes:
    conn = http.client.HTTPConnection(host, port, timeout=_CALL_TIMEOUT_S)
    try:
        conn.request("POST", path, body=b"{}", headers={"Content-Type": "application/json"})
        answer = conn.getresponse()
        body = answer.read()
        if answer.status != 200:
            raise ValueError(f"{path}: HTTP {answer.status}: {body[:200]!r}")
        return body
    finally:
        conn.close()
