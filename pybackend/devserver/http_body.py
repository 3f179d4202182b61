"""The bodies of KServe v2 HTTP inference requests and responses, with Triton's binary
tensor extension (a JSON header of ``Inference-Header-Content-Length`` bytes, then each
binary tensor's bytes in order), read and written as tritonserver 2.51 does: the same
JSON, and its texts for what it refuses."""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..testing.results import parameters_of
from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError
from .shm_regions import Regions, place_of, required
from .tensors import FIXED, element_count, from_raw, to_raw

#: tritonserver's text for JSON data whose element count does not fit its shape (INTERNAL).
DATA_SHAPE = "Unable to parse 'data': Shape does not match true shape of 'data' field"


def parse_request(
    body: bytes, header_length: Optional[int], model: str, regions: Optional[Regions] = None
) -> InferCall:
    """``body`` of ``POST .../infer``; raises :class:`ServeError` with Triton's texts.
    ``regions``: the registered shared memory that inputs may come from and outputs go to."""
    split = len(body) if header_length is None else header_length
    try:
        header = json.loads(body[:split])
    except ValueError as e:
        raise ServeError(f"failed to parse the request JSON buffer: {e}") from None
    if not isinstance(header, dict):
        raise ServeError("failed to parse the request JSON buffer: not a JSON object")
    inputs = header.get("inputs")
    if not isinstance(inputs, list):
        raise ServeError("Unable to parse 'inputs': attempt to access JSON non-array as array")
    binary = memoryview(body)[split:]
    call = InferCall(inputs={}, request_id=str(header.get("id", "")))
    for spec in inputs:
        array, used = _input(spec, binary, model, call.request_id, regions)
        binary = binary[used:]
        call.inputs[str(spec["name"])] = array
    if len(binary):
        raise ServeError(
            f"unexpected additional input data for model '{model}'", ErrorCode.INVALID_ARG
        )
    params = header.get("parameters") or {}
    call.binary_default = bool(params.get("binary_data_output", False))
    call.set_parameters(params)
    for out in header.get("outputs") or []:
        name = str(out["name"])
        out_params = out.get("parameters") or {}
        if "classification" in out_params:
            raise ServeError(
                "the classification extension is not supported by the development server",
                ErrorCode.UNSUPPORTED,
            )
        call.requested.append(name)
        call.binary[name] = bool(out_params.get("binary_data", call.binary_default))
        place = place_of(out_params)
        if place is not None:
            if out_params.get("binary_data"):  # tritonclient itself sends it false
                raise ServeError(
                    "Output can't set both 'shared_memory_region' and 'binary_data'",
                    ErrorCode.INVALID_ARG,
                )
            required(regions, name).check(place)
            call.shm_outputs[name] = place
    return call


def _input(
    spec: Mapping[str, Any],
    binary: memoryview,
    model: str,
    request_id: str,
    regions: Optional[Regions],
) -> Tuple[np.ndarray, int]:
    """One input's array and the number of binary bytes it took."""
    name = str(spec.get("name", ""))
    datatype = str(spec.get("datatype", ""))
    shape = [int(d) for d in spec.get("shape", [])]
    params = spec.get("parameters") or {}
    given = [
        label
        for label, present in (
            ("'data'", "data" in spec),
            ("'binary_data_size'", "binary_data_size" in params),
            ("'shared_memory_region'", "shared_memory_region" in params),
        )
        if present
    ]
    if len(given) > 1:
        raise ServeError(
            "Input must set only one of the following fields: 'data', 'binary_data_size' in "
            "'parameters', 'shared_memory_region' in 'parameters'. But set " + " ".join(given),
            ErrorCode.INVALID_ARG,
        )
    place = place_of(params)
    if place is not None:
        raw = required(regions, name).read(place)
        return from_raw(name, datatype, shape, raw, model, request_id), 0
    size = params.get("binary_data_size")
    if size is not None:
        size = int(size)
        if size > len(binary):
            raise ServeError(
                f"unexpected size for input '{name}', expecting {size - len(binary)} "
                f"additional bytes for model '{model}'",
                ErrorCode.INVALID_ARG,
            )
        return from_raw(name, datatype, shape, binary[:size].tobytes(), model, request_id), size
    if datatype in ("FP16", "BF16"):
        raise ServeError(
            f"receiving {datatype} data via JSON is not supported. Please use the binary "
            f"data format for input {name}",
            ErrorCode.INVALID_ARG,
        )
    flat = flatten(spec.get("data", []))
    if len(flat) != element_count(shape):
        raise ServeError(DATA_SHAPE)
    if datatype == "BYTES":
        items = [v.encode("utf-8", "surrogateescape") if isinstance(v, str) else v for v in flat]
        array = np.empty(len(items), dtype=np.object_)
        array[:] = items
        return array.reshape(shape), 0
    dtype = FIXED.get(datatype)
    if dtype is None:
        raise ServeError(
            f"invalid datatype '{datatype}' of input '{name}' for model '{model}'",
            ErrorCode.INVALID_ARG,
        )
    return np.asarray(flat, dtype=dtype).reshape(shape), 0


def flatten(data: Any) -> List[Any]:
    if not isinstance(data, list):
        return [data]
    out: List[Any] = []
    for item in data:
        out.extend(flatten(item) if isinstance(item, list) else [item])
    return out


def encode_response(
    model: str,
    version: int,
    call: InferCall,
    outputs: Mapping[str, np.ndarray],
    datatypes: Mapping[str, str],
    regions: Optional[Regions] = None,
) -> Tuple[bytes, Optional[int]]:
    """The response body and, when some output travels in binary, its JSON header's length
    (for ``Inference-Header-Content-Length``). Outputs the client placed in its shared
    memory are written there and listed without data, as tritonserver lists them."""
    header: Dict[str, Any] = {}
    if call.request_id:
        header["id"] = call.request_id
    header["model_name"] = model
    header["model_version"] = str(version)
    parameters = parameters_of(outputs)
    if parameters:
        header["parameters"] = parameters
    entries: List[Dict[str, Any]] = []
    blobs: List[bytes] = []
    for name, array in outputs.items():
        datatype = datatypes[name]
        entry: Dict[str, Any] = {"name": name, "datatype": datatype, "shape": list(array.shape)}
        place = call.shm_outputs.get(name)
        if place is not None:
            required(regions, name).write(place, to_raw(array, datatype), name)
        elif call.binary.get(name, call.binary_default):
            raw = to_raw(array, datatype)
            entry["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        elif datatype in ("FP16", "BF16"):
            raise ServeError(
                f"sending {datatype} data via JSON is not supported. Please use the binary "
                "data format for output",
                ErrorCode.INVALID_ARG,
            )
        else:
            entry["data"] = _json_data(array, datatype)
        entries.append(entry)
    header["outputs"] = entries
    # Strings that are not UTF-8 go out as their bytes (surrogateescape), as tritonserver
    # writes them, rather than failing the response.
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False)
    head = text.encode("utf-8", "surrogateescape")
    if not blobs:
        return head, None
    return b"".join([head, *blobs]), len(head)


def _json_data(array: np.ndarray, datatype: str) -> List[Any]:
    flat = np.asarray(array).reshape(-1)
    if datatype == "BYTES":
        return [
            v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else str(v)
            for v in flat.tolist()
        ]
    return flat.tolist()


def error_body(message: str) -> bytes:
    return json.dumps({"error": message}, separators=(",", ":")).encode()
