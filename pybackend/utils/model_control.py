"""Model control from ``model.py`` (``load_model``/``unload_model``/``is_model_ready``):
routed through the transport, which reports them unsupported until the bridge lands."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import transport as _transport
from .arguments import as_bool, as_bytes, as_string, cast_in_body
from .errors import TritonModelException


def load_model(model_name: str, config: str = "", files: Optional[Dict[str, bytes]] = None) -> None:
    model_name = as_string(model_name, "load_model", "model_name")
    config = as_string(config, "load_model", "config")
    blobs = None
    if files is not None:
        if not isinstance(files, dict):
            raise TritonModelException(
                f"failed to load model '{model_name}', files should be a dictionary of file "
                "paths and file contents"
            )
        blobs = {cast_in_body(path, as_string): as_bytes(data) for path, data in files.items()}
    _transport._current.model_control(
        "load_model", model_name=model_name, config=config, files=blobs
    )


def unload_model(model_name: str, unload_dependents: bool = False) -> None:
    _transport._current.model_control(
        "unload_model",
        model_name=as_string(model_name, "unload_model", "model_name"),
        unload_dependents=as_bool(unload_dependents, "unload_model", "unload_dependents"),
    )


def is_model_ready(model_name: str, model_version: str = "") -> Any:
    return _transport._current.model_control(
        "is_model_ready",
        model_name=as_string(model_name, "is_model_ready", "model_name"),
        model_version=as_string(model_version, "is_model_ready", "model_version"),
    )
