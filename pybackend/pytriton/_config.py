"""The config.pbtxt of a bound model, built through Triton's own protobuf schema
(tritonclient's model_config_pb2), as PyTriton's generator fills it."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

import numpy as np

from ..utils.dtypes import numpy_to_triton_type
from .exceptions import PyTritonBadParameterError, PyTritonModelConfigError
from .model_config import ModelConfig, QueuePolicy, Tensor

#: The model parameter that selects attach mode in our backend (csrc/backend/model_state.cc).
ATTACH_PARAMETER = "PYBACKEND_ATTACH_SOCKET"

_TRITON_TYPE_NAMES = {
    1: "TYPE_BOOL", 2: "TYPE_UINT8", 3: "TYPE_UINT16", 4: "TYPE_UINT32", 5: "TYPE_UINT64",
    6: "TYPE_INT8", 7: "TYPE_INT16", 8: "TYPE_INT32", 9: "TYPE_INT64", 10: "TYPE_FP16",
    11: "TYPE_FP32", 12: "TYPE_FP64", 13: "TYPE_STRING", 14: "TYPE_BF16",
}  # fmt: skip


def named(tensors: Sequence[Tensor], prefix: str) -> List[Tensor]:
    """Unnamed tensors are called <prefix>_<n>, counted from 1 (PyTriton's names)."""
    return [
        t if t.name else Tensor(t.shape, t.dtype, f"{prefix}_{i}", t.optional)
        for i, t in enumerate(tensors, start=1)
    ]


def data_type(dtype: Any) -> str:
    if dtype in (bytes, object, np.bytes_, np.object_, str, np.str_):
        return "TYPE_STRING"
    code = numpy_to_triton_type(np.dtype(dtype).type)
    if code is None or code not in _TRITON_TYPE_NAMES:
        raise PyTritonModelConfigError(f"Unsupported dtype {dtype!r} for a Triton tensor.")
    return _TRITON_TYPE_NAMES[code]


def _queue_policy(p: QueuePolicy) -> Dict[str, Any]:
    return {
        "timeoutAction": p.timeout_action.value,
        "defaultTimeoutMicroseconds": int(p.default_timeout_microseconds),
        "allowTimeoutOverride": bool(p.allow_timeout_override),
        "maxQueueSize": int(p.max_queue_size),
    }


def _batching(config: ModelConfig) -> Dict[str, Any]:
    if not config.batching:
        return {"maxBatchSize": 0}
    if config.max_batch_size < 1:
        raise PyTritonBadParameterError("The `max_batch_size` must be greater or equal to 1.")
    b = config.batcher
    dyn: Dict[str, Any] = {}
    if b.max_queue_delay_microseconds > 0:
        dyn["maxQueueDelayMicroseconds"] = int(b.max_queue_delay_microseconds)
    if b.preferred_batch_size:
        dyn["preferredBatchSize"] = [int(s) for s in b.preferred_batch_size]
    if b.preserve_ordering:
        dyn["preserveOrdering"] = True
    if b.priority_levels:
        dyn["priorityLevels"] = int(b.priority_levels)
    if b.default_priority_level:
        if b.default_priority_level > b.priority_levels:
            raise PyTritonBadParameterError(
                f"The `default_priority_level` must be between 1 and {b.priority_levels}."
            )
        dyn["defaultPriorityLevel"] = int(b.default_priority_level)
    if b.default_queue_policy:
        dyn["defaultQueuePolicy"] = _queue_policy(b.default_queue_policy)
    if b.priority_queue_policy:
        if not b.priority_levels:
            raise PyTritonBadParameterError(
                "Provide the `priority_levels` if you want to define `priority_queue_policy` "
                "for Dynamic Batching."
            )
        for level in b.priority_queue_policy:
            if level < 0 or level > b.priority_levels:
                raise PyTritonBadParameterError(
                    f"Invalid `priority`={level} provided. The value must be between "
                    f"1 and {b.priority_levels}."
                )
        dyn["priorityQueuePolicy"] = {
            str(k): _queue_policy(v) for k, v in b.priority_queue_policy.items()
        }
    return {"maxBatchSize": int(config.max_batch_size), "dynamicBatching": dyn}


def model_config_dict(
    name: str,
    inputs: Sequence[Tensor],
    outputs: Sequence[Tensor],
    config: ModelConfig,
    instances: int,
    attach_socket: str,
) -> Dict[str, Any]:
    """The configuration as ModelConfig's JSON form (camelCase field names)."""

    def io(t: Tensor, is_input: bool) -> Dict[str, Any]:
        item: Dict[str, Any] = {
            "name": t.name,
            "dataType": data_type(t.dtype),
            "dims": [int(d) for d in t.shape],
        }
        if is_input and t.optional:
            item["optional"] = True
        return item

    out: Dict[str, Any] = {
        "name": name,
        "backend": "python",
        "input": [io(t, True) for t in inputs],
        "output": [io(t, False) for t in outputs],
        "instanceGroup": [{"count": int(instances), "kind": "KIND_CPU"}],
        "parameters": {ATTACH_PARAMETER: {"stringValue": attach_socket}},
    }
    out.update(_batching(config))
    if config.decoupled:
        out["modelTransactionPolicy"] = {"decoupled": True}
    if config.response_cache:
        out["responseCache"] = {"enable": True}
    return out


def config_pbtxt(config: Dict[str, Any]) -> str:
    """Validated against Triton's schema, then written as text protobuf."""
    from google.protobuf import json_format, text_format
    from tritonclient.grpc import model_config_pb2

    try:
        message = json_format.ParseDict(config, model_config_pb2.ModelConfig())
    except json_format.ParseError as e:
        raise PyTritonModelConfigError(f"Invalid model configuration: {e}") from None
    text = text_format.MessageToString(message)
    if "max_batch_size" not in text:
        text += "max_batch_size: 0\n"
    return text
