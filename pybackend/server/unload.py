"""Unload an explicit-mode tritonserver's models before it is stopped.

tritonserver's shutdown unloads the models itself, but it checks whether they are gone only
once a second, so every stop costs at least a second. Unloaded beforehand (the repository
API), the shutdown finds nothing live and exits at once. Best effort and bounded: whatever is
still loaded when the time is up, the shutdown unloads as before.
"""

from __future__ import annotations

import json
import time
from urllib.parse import quote

from pybackend.server.http_call import http_call

#: How long the models get to unload (finalize included) before the shutdown takes over.
UNLOAD_WAIT_S = 5.0
#: Per HTTP call: a frozen or busy server costs the stop little more than this.
_CALL_TIMEOUT_S = 0.5
#: Between looks at the index (tritonserver's own shutdown looks once a second).
_POLL_S = 0.02
#: States of a model still holding its instances (the index says UNAVAILABLE once unloaded).
_LIVE = ("READY", "LOADING", "UNLOADING")


def unload_models(host: str, port: int, wait_s: float = UNLOAD_WAIT_S) -> bool:
    """Ask the server at ``host:port`` (HTTP) to unload every model it has loaded and wait up
    to ``wait_s`` for them to be gone. True when none is left; False when time ran out or
    the server did not do as asked (no answer, a refusal: a restricted repository API)."""
    deadline = time.monotonic() + wait_s
    try:
        live = _live_models(host, port)
        for name in live or []:
            path = f"/v2/repository/models/{quote(name)}/unload"
            if time.monotonic() > deadline or _post(host, port, path) is None:
                return False
        while live:
            if time.monotonic() > deadline:
                return False
            time.sleep(_POLL_S)
            live = _live_models(host, port)
        return live is not None
    except Exception:  # noqa: BLE001 - best effort (an index not as documented, ...)
        return False


def _live_models(host: str, port: int) -> list[str] | None:
    """The loaded models' names; None when the index cannot be read."""
    answer = _post(host, port, "/v2/repository/index")
    if answer is None:
        return None
    index = json.loads(answer)
    return sorted({entry["name"] for entry in index if entry.get("state") in _LIVE})


def _post(host: str, port: int, path: str) -> bytes | None:
    """The body of a successful POST; None for no answer or another status than 200."""
    answer = http_call(host, port, "POST", path, timeout=_CALL_TIMEOUT_S, body=b"{}")
    return answer[1] if answer is not None and answer[0] == 200 else None
