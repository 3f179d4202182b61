"""The config.pbtxt of a bound model, built through Triton's own protobuf schema
(tritonclient's model_config_pb2), as PyTriton's generator fills it."""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np

from ..utils.dtypes import code_of_dtype
from .exceptions import PyTritonBadParameterError, PyTritonModelConfigError
from .model_config import (
    DynamicBatcher,
    ModelConfig,
    QueuePolicy,
    SequenceBatcher,
    SequenceControl,
    SequenceStrategy,
    Tensor,
)

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
        t if t.name else dataclasses.replace(t, name=f"{prefix}_{i}")
        for i, t in enumerate(tensors, start=1)
    ]


def data_type(dtype: Any) -> str:
    if dtype in (bytes, object, np.bytes_, np.object_, str, np.str_):
        return "TYPE_STRING"
    code = code_of_dtype(np.dtype(dtype).type)
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


_FLAG_VALUES = {"TYPE_INT32": "int32FalseTrue", "TYPE_FP32": "fp32FalseTrue",
                "TYPE_BOOL": "boolFalseTrue"}  # fmt: skip
_FLAG_PAIRS: Dict[str, List[Any]] = {
    "int32FalseTrue": [0, 1], "fp32FalseTrue": [0.0, 1.0], "boolFalseTrue": [False, True],
}  # fmt: skip
# Not TYPE_STRING: tritonserver 2.51 fills a string CORRID tensor so that it refuses every
# request of the model (integer and string ids alike, with NVIDIA's Python backend too).
_CORRID_TYPES = {"TYPE_UINT64", "TYPE_INT64", "TYPE_UINT32", "TYPE_INT32"}


def _sequence_batching(s: SequenceBatcher, max_batch_size: int, model: str) -> Dict[str, Any]:
    """ModelConfig.sequence_batcher as model_config.proto's ``sequence_batching``."""
    out: Dict[str, Any] = {}
    if s.max_sequence_idle_microseconds:
        out["maxSequenceIdleMicroseconds"] = int(s.max_sequence_idle_microseconds)
    controls = []
    for c in s.control_inputs:
        kind = SequenceControl(c.kind)
        dtype = data_type(c.dtype)
        control: Dict[str, Any] = {"kind": kind.value}
        if kind is SequenceControl.CORRID:
            if dtype == "TYPE_STRING":
                raise PyTritonBadParameterError(
                    f"Model `{model}`: control input `{c.name}` (CORRID) has a string dtype, "
                    "which tritonserver 2.51 fills so that it refuses every request. String "
                    "correlation ids need no control input (request.sequence_id holds them): "
                    "leave CORRID out, or use np.uint64, np.int64, np.uint32 or np.int32."
                )
            if dtype not in _CORRID_TYPES:
                raise PyTritonBadParameterError(
                    f"Model `{model}`: control input `{c.name}` (CORRID) has dtype "
                    f"{c.dtype!r}; use np.uint64, np.int64, np.uint32 or np.int32."
                )
            control["dataType"] = dtype
        elif dtype in _FLAG_VALUES:
            field = _FLAG_VALUES[dtype]
            control[field] = _FLAG_PAIRS[field]
        else:
            raise PyTritonBadParameterError(
                f"Model `{model}`: control input `{c.name}` ({kind.name}) has dtype "
                f"{c.dtype!r}; use np.int32, np.float32 or np.bool_."
            )
        controls.append({"name": c.name, "control": [control]})
    if controls:
        out["controlInput"] = controls
    strategy = SequenceStrategy(s.strategy)
    if strategy is SequenceStrategy.DIRECT:
        direct: Dict[str, Any] = {}
        if s.max_queue_delay_microseconds:
            direct["maxQueueDelayMicroseconds"] = int(s.max_queue_delay_microseconds)
        if s.minimum_slot_utilization:
            direct["minimumSlotUtilization"] = float(s.minimum_slot_utilization)
        out["direct"] = direct
    else:
        oldest: Dict[str, Any] = {
            # Triton requires at least one candidate sequence.
            "maxCandidateSequences": int(s.max_candidate_sequences or max(max_batch_size, 1))
        }
        if s.preferred_batch_size:
            oldest["preferredBatchSize"] = [int(b) for b in s.preferred_batch_size]
        if s.max_queue_delay_microseconds:
            oldest["maxQueueDelayMicroseconds"] = int(s.max_queue_delay_microseconds)
        if s.preserve_ordering:
            oldest["preserveOrdering"] = True
        out["oldest"] = oldest
    return out


def _batching(config: ModelConfig, model: str) -> Dict[str, Any]:
    sequence = config.sequence_batcher
    if sequence is not None and config.batcher != DynamicBatcher():
        raise PyTritonBadParameterError(
            f"Model `{model}` has one batcher: set either `batcher` (dynamic batching) or "
            "`sequence_batcher` in its ModelConfig, not both."
        )
    if not config.batching:
        out: Dict[str, Any] = {"maxBatchSize": 0}
        if sequence is not None:
            out["sequenceBatching"] = _sequence_batching(sequence, 0, model)
        return out
    if config.max_batch_size < 1:
        raise PyTritonBadParameterError("The `max_batch_size` must be greater or equal to 1.")
    if sequence is not None:
        return {
            "maxBatchSize": int(config.max_batch_size),
            "sequenceBatching": _sequence_batching(sequence, config.max_batch_size, model),
        }
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


def _sample_bytes(value: np.ndarray) -> bytes:
    """One sample in Triton's raw warmup format: row-major bytes; a string element is its
    4-byte little-endian length, then its bytes."""
    if value.dtype.kind in "OSU":
        out = bytearray()
        for item in value.reshape(-1):
            raw = item.encode() if isinstance(item, str) else bytes(item)
            out += len(raw).to_bytes(4, "little") + raw
        return bytes(out)
    return np.ascontiguousarray(value).tobytes()


def warmup(config: ModelConfig) -> Tuple[List[Dict[str, Any]], Dict[str, bytes]]:
    """ModelConfig.model_warmup as model_config.proto's ``model_warmup`` (Triton runs it
    through the bound callable when it loads the model), and the files it reads: PyTriton's
    ``input_data_file`` is a .npy file; Triton's is raw data under the model's warmup/."""
    samples: List[Dict[str, Any]] = []
    files: Dict[str, bytes] = {}
    for w in config.model_warmup or []:
        inputs: Dict[str, Any] = {}
        for name, spec in w.inputs.items():
            shape = tuple(int(d) for d in spec.shape)
            item: Dict[str, Any] = {"dataType": data_type(spec.dtype), "dims": list(shape)}
            if spec.input_data_file:
                data = np.load(spec.input_data_file, allow_pickle=False)
                if data.shape != shape and data.shape[1:] == shape and len(data):
                    data = data[0]  # a batch in the file: Triton repeats one sample
                if data.shape != shape:
                    raise PyTritonBadParameterError(
                        f"Warmup `{w.name}`: input `{name}` file {spec.input_data_file} holds "
                        f"shape {data.shape}; expected {shape} (one sample)."
                    )
                if data.dtype.kind not in "OSU":
                    data = data.astype(spec.dtype)
                path = f"warmup/{w.name}_{name}"
                files[path] = _sample_bytes(data)
                item["inputDataFile"] = path.split("/", 1)[1]
            elif spec.random_data:
                item["randomData"] = True
            elif spec.zero_data:
                item["zeroData"] = True
            else:
                raise PyTritonBadParameterError(
                    "One of 'zero_data', 'random_data', or 'input_data_file' must be provided "
                    f"for warmup input `{name}` of warmup `{w.name}`."
                )
            inputs[name] = item
        samples.append(
            {
                "name": w.name,
                "batchSize": int(w.batch_size),
                "count": int(w.count),
                "inputs": inputs,
            }
        )
    return samples, files


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

    parameters = {ATTACH_PARAMETER: {"stringValue": attach_socket}}
    on_gpu = any(t.device == "cuda" for t in list(inputs) + list(outputs))
    if any(t.device == "cuda" for t in inputs):
        # GPU inputs stay where Triton has them (the stub's CUDA IPC path).
        parameters["FORCE_CPU_ONLY_INPUT_TENSORS"] = {"stringValue": "no"}
    out: Dict[str, Any] = {
        "name": name,
        "backend": "python",
        "input": [io(t, True) for t in inputs],
        "output": [io(t, False) for t in outputs],
        # A GPU model's instances live on a device: count instances on each visible GPU.
        "instanceGroup": [{"count": int(instances), "kind": "KIND_GPU" if on_gpu else "KIND_CPU"}],
        "parameters": parameters,
    }
    out.update(_batching(config, name))
    if config.decoupled:
        out["modelTransactionPolicy"] = {"decoupled": True}
    if config.response_cache:
        out["responseCache"] = {"enable": True}
    samples, _files = warmup(config)
    if samples:
        out["modelWarmup"] = samples
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
