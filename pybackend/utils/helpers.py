"""The module-level helper functions of pb_utils (spec §3.1)."""

from __future__ import annotations

from typing import Any, Dict, Optional

from . import transport as _transport
from .request import InferenceRequest
from .response import InferenceResponse
from .tensor import Tensor


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Optional[Tensor]:
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Optional[Tensor]:
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def _config_by_name(model_config: Dict[str, Any], key: str, name: str) -> Optional[Dict[str, Any]]:
    # Plain `in` and indexing, as the original's pure-Python helper: the same values pass
    # (any container without the key gives None) and the same ones fail.
    if key in model_config:
        for entry in model_config[key]:
            if entry["name"] == name:
                return entry
    return None


def get_input_config_by_name(model_config: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    return _config_by_name(model_config, "input", name)


def get_output_config_by_name(model_config: Dict[str, Any], name: str) -> Optional[Dict[str, Any]]:
    return _config_by_name(model_config, "output", name)


def using_decoupled_model_transaction_policy(model_config: Dict[str, Any]) -> bool:
    if "model_transaction_policy" in model_config:
        return model_config["model_transaction_policy"].get("decoupled", False)
    return False


def get_model_dir() -> str:
    """The directory holding the model file, ``<repo>/<model>/<version>``."""
    return _transport._current.model_dir
