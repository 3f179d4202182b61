"""``pb_utils.load_model`` / ``unload_model`` / ``is_model_ready`` in the stub: RPCs on the
async channel that the backend answers through TRITONSERVER_ServerLoadModelWithParameters,
ServerUnloadModel(AndDependents) and ServerModelIsReady (spec 3.2, "Model control")."""

from __future__ import annotations

import re
from typing import Any, Dict, Optional

from ..ipc.bls_codec import encode_model_load, encode_model_ready, encode_model_unload
from ..ipc.protocol import MessageKind
from ..utils.errors import TritonModelException
from .failures import failed_request_text
from .state import RpcError, StubState

# Loading runs the model's initialize: allow far longer than ordinary RPCs.
LOAD_TIMEOUT_S = 3600.0


def _fail(instance: str, what: str, error: str) -> TritonModelException:
    return TritonModelException(f"{what}: {failed_request_text(instance, error)}")


def model_control(state: StubState, instance: str, op: str, **kw: Any) -> Any:
    if op == "load_model":
        return _load(state, instance, kw["model_name"], kw.get("config", ""), kw.get("files"))
    if op == "unload_model":
        name = kw["model_name"]
        _check_name(name)
        try:
            state.rpc(
                MessageKind.MODEL_UNLOAD,
                encode_model_unload(name, bool(kw.get("unload_dependents", False))),
                LOAD_TIMEOUT_S,
            )
        except RpcError as e:
            raise _fail(instance, "Failed to unload model", str(e)) from None
        return None
    if op == "is_model_ready":
        name = kw["model_name"]
        _check_name(name)
        version = _version(instance, kw.get("model_version", ""))
        try:
            payload = state.rpc(MessageKind.MODEL_READY, encode_model_ready(name, version))
        except RpcError as e:
            raise _fail(instance, "Failed to check model readiness", str(e)) from None
        return bool(payload.nbytes and payload[0])
    raise TritonModelException(f"unknown model control operation {op!r}")


def _load(
    state: StubState, instance: str, name: str, config: str, files: Optional[Dict[str, bytes]]
) -> None:
    _check_name(name)
    if not isinstance(config, str):
        raise TypeError(f"load_model(): config must be a JSON string, got {type(config).__name__}")
    blobs: Dict[str, bytes] = {}
    for path, content in (files or {}).items():
        if not isinstance(path, str) or not isinstance(content, (bytes, bytearray)):
            raise TypeError(
                f"load_model(): files must map 'file:<relative path>' strings to bytes, got "
                f"{type(path).__name__} -> {type(content).__name__}"
            )
        blobs[path] = bytes(content)
    try:
        state.rpc(MessageKind.MODEL_LOAD, encode_model_load(name, config, blobs), LOAD_TIMEOUT_S)
    except RpcError as e:
        raise _fail(instance, "Failed to load model", str(e)) from None


def _check_name(name: Any) -> None:
    if not isinstance(name, str):
        raise TypeError(f"model_name must be a str, got {type(name).__name__}")


def _version(instance: str, version: Any) -> int:
    """ "" means the latest version (-1); otherwise an integer >= 0, read like C++ stol
    (leading digits count, the rest is ignored), with the original's error texts."""
    if version == "" or version is None:
        return -1
    text = str(version)
    match = re.match(r"\s*[+-]?\d+", text)
    details = "" if match else " (details: stol)"
    value = int(match.group()) if match else -1
    if value < 0:
        raise _fail(
            instance,
            "Failed to check model readiness",
            f"failed to get model version from specified version string '{text}'{details}, "
            "version should be an integral value > 0",
        )
    return value
