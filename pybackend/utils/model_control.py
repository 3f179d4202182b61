"""Model control from ``model.py`` (``load_model``/``unload_model``/``is_model_ready``):
routed through the transport, which reports them unsupported until the bridge lands."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import transport as _transport


def load_model(model_name: str, config: str = "", files: Optional[Dict[str, bytes]] = None) -> None:
    if files is not None and not isinstance(files, dict):
        from .errors import TritonModelException

        raise TritonModelException(
            f"failed to load model '{model_name}', files should be a dictionary of file "
            "paths and file contents"
        )
    _transport._current.model_control(
        "load_model", model_name=model_name, config=config, files=files
    )


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    _transport._current.model_control(
        "unload_model", model_name=model_name, unload_dependents=unload_dependents
    )


def is_model_ready(model_name: str, model_version: str = "") -> Any:
    return _transport._current.model_control(
        "is_model_ready", model_name=model_name, model_version=model_version
    )
