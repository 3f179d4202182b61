"""PyTriton's public API served by pybackend: change ``pytriton.`` to
``pybackend.pytriton.`` in the imports (docs/pytriton.md). The bound callables run in this
process, which our backend attaches to as the stub of each model instance."""

from __future__ import annotations

import importlib
from typing import Any

# ``import pytriton`` makes pytriton.client, .model_config and .triton reachable as
# attributes; here they are imported on first use, so importing one submodule does not
# import the server side with it.
_SUBMODULES = ("client", "model_config", "triton")


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
