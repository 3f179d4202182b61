"""Where unpacked environments and the stubs' import directories live."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Overrides the default location (a directory the server's user can write).
CACHE_VARIABLE = "PYBACKEND_ENV_CACHE"


def cache_root() -> Path:
    """$PYBACKEND_ENV_CACHE, else $XDG_CACHE_HOME/pybackend or ~/.cache/pybackend, else (no
    writable home, as for a server run as an unprivileged user in a container) a
    per-user directory under the temporary directory."""
    explicit = os.environ.get(CACHE_VARIABLE)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    candidate = Path(base, "pybackend")
    try:
        candidate.mkdir(parents=True, exist_ok=True)
        if os.access(candidate, os.W_OK | os.X_OK):
            return candidate
    except OSError:
        pass
    return Path(tempfile.gettempdir(), f"pybackend-{os.getuid()}")
