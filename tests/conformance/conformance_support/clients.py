"""tritonclient helpers: one call shape for HTTP and gRPC, exact values back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

PROTOCOLS = ("http", "grpc")


def client_for(server: Any, protocol: str, timeout: float = 60.0) -> Any:
    if protocol == "http":
        return httpclient.InferenceServerClient(
            server.http_url, connection_timeout=timeout, network_timeout=timeout
        )
    if protocol == "grpc":
        return grpcclient.InferenceServerClient(server.grpc_url)
    raise ValueError(f"unknown protocol {protocol!r}")


def _module(protocol: str) -> Any:
    return httpclient if protocol == "http" else grpcclient


def make_input(protocol: str, name: str, array: np.ndarray, datatype: str | None = None) -> Any:
    """An InferInput; ``datatype`` overrides the numpy-derived one (BF16 from float32)."""
    dtype = datatype or np_to_triton_dtype(array.dtype)
    tensor = _module(protocol).InferInput(name, list(array.shape), dtype)
    tensor.set_data_from_numpy(array)
    return tensor


@dataclass
class Result:
    outputs: dict[str, np.ndarray] = field(default_factory=dict)
    datatypes: dict[str, str] = field(default_factory=dict)
    parameters: dict[str, Any] = field(default_factory=dict)
    model_version: str = ""


def _grpc_param(param: Any) -> Any:
    kind = param.WhichOneof("parameter_choice")
    return getattr(param, kind) if kind else None


def infer(
    server: Any,
    protocol: str,
    model: str,
    inputs: Mapping[str, np.ndarray | tuple[np.ndarray, str]],
    outputs: Sequence[str] | None = None,
    *,
    client_timeout: float | None = None,
    **kwargs: Any,
) -> Result:
    """Run one inference; raises tritonclient's InferenceServerException on error.

    ``inputs`` maps name -> array, or name -> (array, datatype) to force a datatype.
    ``outputs`` None means the client requests none (Triton then returns them all).
    """
    if protocol == "http":
        client = client_for(server, protocol, timeout=client_timeout or 60.0)
    else:
        client = client_for(server, protocol)
    try:
        infer_inputs = []
        for name, value in inputs.items():
            array, dtype = value if isinstance(value, tuple) else (value, None)
            infer_inputs.append(make_input(protocol, name, array, dtype))
        requested = None
        if outputs is not None:
            out_cls = _module(protocol).InferRequestedOutput
            requested = [out_cls(name) for name in outputs]
        call_kwargs = dict(kwargs)
        if client_timeout is not None and protocol == "grpc":
            call_kwargs["client_timeout"] = client_timeout
        reply = client.infer(model, infer_inputs, outputs=requested, **call_kwargs)
        result = Result()
        if protocol == "http":
            response = reply.get_response()
            result.parameters = dict(response.get("parameters", {}))
            result.model_version = response.get("model_version", "")
            for out in response.get("outputs", []):
                result.datatypes[out["name"]] = out["datatype"]
                result.outputs[out["name"]] = reply.as_numpy(out["name"])
        else:
            response = reply.get_response()
            result.parameters = {k: _grpc_param(v) for k, v in response.parameters.items()}
            result.model_version = response.model_version
            for out in response.outputs:
                result.datatypes[out.name] = out.datatype
                result.outputs[out.name] = reply.as_numpy(out.name)
        return result
    finally:
        client.close()


@dataclass
class ErrorInfo:
    message: str
    status: str


def infer_error(
    server: Any, protocol: str, model: str, inputs: Mapping[str, Any], **kw: Any
) -> ErrorInfo:
    """Run an inference that must fail; returns the server's message and status."""
    try:
        infer(server, protocol, model, inputs, **kw)
    except InferenceServerException as exc:
        return ErrorInfo(message=exc.message(), status=str(exc.status()))
    raise AssertionError(f"inference on {model!r} over {protocol} unexpectedly succeeded")


def bytes_input(*values: bytes | str) -> np.ndarray:
    return np.array([v.encode() if isinstance(v, str) else v for v in values], dtype=np.object_)


def text_output(result: Result, name: str) -> str:
    """The single BYTES element of output ``name`` decoded as UTF-8."""
    array = result.outputs[name]
    assert array.size == 1, f"{name} has {array.size} elements"
    value = array.reshape(-1)[0]
    return value.decode() if isinstance(value, bytes) else str(value)
