"""Triton's generate extension (``POST /v2/models/<m>/generate`` and ``generate_stream``),
read and written as tritonserver 2.51 does: the request is one flat JSON object whose keys
that name an input become that input (shaped by the config's dims) and whose other keys
become request parameters; a response is one JSON object of the outputs (a one-element
output as a bare value) beside ``model_name`` and ``model_version``; ``generate_stream``
sends each response as a server-sent event while the model produces them."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional

import numpy as np

from ..testing.results import parameters_of
from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError
from .http_body import DATA_SHAPE, flatten
from .tensors import FIXED, element_count, wire_name

#: tritonserver's texts (2.51).
NOT_ONE_RESPONSE = (
    "generate expects model to produce exactly 1 response, use generate stream for model "
    "that generates various number of responses"
)
PARAMETER_TYPE = "parameter '{}' has invalid type. It should be either 'int', 'bool', or 'string'."
NO_SHAPE = "The schema can not convert input '{}' to tensor with proper shape"


def parse_generate(body: bytes, config: Mapping[str, Any]) -> InferCall:
    try:
        request = json.loads(body)
    except ValueError as e:
        raise ServeError(f"failed to parse the request JSON buffer: {e}") from None
    if not isinstance(request, dict):
        raise ServeError("failed to parse the request JSON buffer: not a JSON object")
    specs = {str(t["name"]): t for t in config.get("input", [])}
    batching = int(config.get("max_batch_size", 0) or 0) > 0
    call = InferCall(inputs={})
    for key, value in request.items():
        if key in specs:
            call.inputs[key] = _tensor(key, value, specs[key], batching)
        elif key == "parameters" and isinstance(value, dict):
            for name, item in value.items():
                call.parameters[name] = _parameter(name, item)
        else:
            call.parameters[key] = _parameter(key, value)
    if "id" in request:
        call.request_id = str(request["id"])
    return call


def _parameter(name: str, value: Any) -> Any:
    if isinstance(value, (list, dict)) or value is None:
        raise ServeError(PARAMETER_TYPE.format(name), ErrorCode.INVALID_ARG)
    return value


def _tensor(name: str, value: Any, spec: Mapping[str, Any], batching: bool) -> np.ndarray:
    """A JSON array (or one value) as the input, shaped by the config's dims: every
    variable dimension but the last is 1, the last takes what the array's length leaves
    (its length, not its elements: nested arrays then fail as in tritonserver)."""
    count = len(value) if isinstance(value, list) else 1
    shape = ([1] if batching else []) + [int(d) for d in spec.get("dims", [])]
    free = [i for i, d in enumerate(shape) if d < 0]
    for i in free[:-1]:
        shape[i] = 1
    if free:
        known = element_count([d for d in shape if d >= 0])
        if known == 0 or count % known:
            raise ServeError(NO_SHAPE.format(name), ErrorCode.INVALID_ARG)
        shape[free[-1]] = count // known
    if element_count(shape) != count:
        raise ServeError(NO_SHAPE.format(name), ErrorCode.INVALID_ARG)
    flat = flatten(value)
    if len(flat) != count or any(isinstance(v, dict) for v in flat):
        raise ServeError(DATA_SHAPE)
    datatype = wire_name(str(spec.get("data_type", "")))
    try:
        if datatype == "BYTES":
            array = np.empty(len(flat), dtype=np.object_)
            array[:] = [v.encode() if isinstance(v, str) else str(v).encode() for v in flat]
        else:
            array = np.asarray(flat, dtype=FIXED[datatype])
    except (KeyError, TypeError, ValueError):
        raise ServeError(NO_SHAPE.format(name), ErrorCode.INVALID_ARG) from None
    return array.reshape(shape)


def encode_generated(
    model: str, version: Optional[int], request_id: str, outputs: Mapping[str, np.ndarray]
) -> bytes:
    """One response as tritonserver writes it: keys in order, a one-element output bare."""
    body: Dict[str, Any] = {name: _value(array) for name, array in outputs.items()}
    body.update(parameters_of(outputs))  # the response's parameters sit beside its outputs
    if request_id:
        body["id"] = request_id
    body["model_name"] = model
    body["model_version"] = str(version or 1)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8", "surrogateescape")


def _value(array: np.ndarray) -> Any:
    flat: List[Any] = np.asarray(array).reshape(-1).tolist()
    flat = [v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v for v in flat]
    return flat[0] if len(flat) == 1 else flat


def event(payload: bytes) -> bytes:
    """One server-sent event."""
    return b"data: " + payload + b"\n\n"
