"""``ModelConfigParser`` (``pytriton.model_config.parser``): a server's model
configuration (the JSON of ``get_model_config``, or a ``config.pbtxt``) as a
TritonModelConfig, with PyTriton's rules and error texts. The clients' ``model_config``
and ``pytriton.client.utils.get_model_config`` read it through here. Keys are taken in
both spellings the server uses (``max_batch_size`` and ``maxBatchSize``)."""

from __future__ import annotations

import logging
import pathlib
import re
from typing import Any, Dict, List, Optional

import numpy as np

from ..exceptions import PyTritonModelConfigError
from .common import DeviceKind, DynamicBatcher, ModelWarmup, QueuePolicy, TimeoutAction, WarmupInput
from .triton_model_config import ResponseCache, TensorSpec, TritonModelConfig

LOGGER = logging.getLogger(__name__)


def _get(config: Dict[str, Any], key: str, default: Any = None) -> Any:
    """``key`` (snake_case, as model_config.proto) or its camelCase JSON spelling."""
    if key in config:
        return config[key]
    camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
    return config.get(camel, default)


def _dtype(data_type: Optional[str], not_defined: str, invalid: str, unsupported: str) -> Any:
    """The numpy dtype of a ``TYPE_X`` name; each way it can be wrong raises its own text
    (PyTriton words it for where the name stands: an input/output, a warmup input)."""
    if not data_type:
        raise PyTritonModelConfigError(not_defined)
    parts = data_type.split("_")
    if len(parts) != 2:
        raise PyTritonModelConfigError(invalid)
    if parts[1] == "STRING":
        return np.bytes_
    # tritonclient's table, as PyTriton uses it (BF16 and BYTES included).
    from tritonclient.utils import triton_to_np_dtype

    dtype = triton_to_np_dtype(parts[1])
    if dtype is None:
        raise PyTritonModelConfigError(unsupported)
    return np.bool_ if dtype is bool else dtype


def _queue_policy(config: Dict[str, Any]) -> QueuePolicy:
    return QueuePolicy(
        timeout_action=TimeoutAction(_get(config, "timeout_action", TimeoutAction.REJECT.value)),
        default_timeout_microseconds=int(_get(config, "default_timeout_microseconds", 0)),
        allow_timeout_override=bool(_get(config, "allow_timeout_override", False)),
        max_queue_size=int(_get(config, "max_queue_size", 0)),
    )


class ModelConfigParser:
    """Builds a TritonModelConfig from a server's model configuration."""

    @classmethod
    def from_dict(cls, model_config_dict: Dict) -> TritonModelConfig:
        """The configuration as ``get_model_config`` returns it (HTTP's JSON, or gRPC's
        with ``as_json=True``)."""
        c = model_config_dict
        max_batch_size = int(_get(c, "max_batch_size", 0) or 0)
        batching = _get(c, "dynamic_batching")
        parameters = _get(c, "parameters", [])
        if isinstance(parameters, list):
            backend_parameters = dict.fromkeys(parameters, "")
        elif isinstance(parameters, dict):
            backend_parameters = {k: _get(v, "string_value") for k, v in parameters.items()}
        else:
            raise TypeError(f"Invalid type for backend_parameters_config: {type(parameters)}")
        cache = _get(c, "response_cache")
        warmup = _get(c, "model_warmup")
        return TritonModelConfig(
            model_name=c["name"],
            batching=max_batch_size > 0,
            max_batch_size=max_batch_size,
            batcher=None if batching is None else cls._batcher(batching),
            inputs=[cls.rewrite_io_spec(t, "input", i) for i, t in enumerate(c.get("input", []))]
            or None,
            outputs=[cls.rewrite_io_spec(t, "output", i) for i, t in enumerate(c.get("output", []))]
            or None,
            instance_group={
                DeviceKind(g["kind"]): g.get("count") for g in _get(c, "instance_group", [])
            },
            decoupled=bool(_get(_get(c, "model_transaction_policy", {}), "decoupled", False)),
            backend_parameters=backend_parameters,
            response_cache=ResponseCache(enable=bool(cache["enable"])) if cache else None,
            model_warmup=cls._warmup(warmup) if warmup else None,
        )

    @classmethod
    def from_file(cls, *, config_path: pathlib.Path) -> TritonModelConfig:
        """A ``config.pbtxt`` (protobuf text format, model_config.proto)."""
        from google.protobuf import json_format, text_format
        from tritonclient.grpc import model_config_pb2

        with config_path.open("r") as f:
            proto = text_format.Parse(f.read(), model_config_pb2.ModelConfig())
        as_dict = json_format.MessageToDict(proto, preserving_proto_field_name=True)
        return cls.from_dict(model_config_dict=as_dict)

    @classmethod
    def rewrite_io_spec(cls, item: Dict, io_type: str, idx: int) -> TensorSpec:
        """One ``input``/``output`` entry as a TensorSpec; PyTriton's errors."""
        name = item.get("name")
        if not name:
            raise PyTritonModelConfigError(f"Name for {io_type} at index {idx} not provided.")
        data_type = _get(item, "data_type")
        dtype = _dtype(
            data_type,
            f"Data type for {io_type} with name `{name}` not defined.",
            f"Invalid data type `{data_type}` for {io_type} with name `{name}` not defined. "
            "The expected name is TYPE_{type}.",
            f"Unsupported data type `{data_type}` for {io_type} with name `{name}`",
        )
        dims = item.get("dims", [])
        if not dims:
            raise PyTritonModelConfigError(
                f"Dimension for {io_type} with name `{name}` not defined."
            )
        shape = tuple(int(d) for d in dims)
        return TensorSpec(name=name, shape=shape, dtype=dtype, optional=item.get("optional", False))

    @classmethod
    def _batcher(cls, config: Dict[str, Any]) -> DynamicBatcher:
        default_policy = _get(config, "default_queue_policy")
        priority = _get(config, "priority_queue_policy")
        return DynamicBatcher(
            preferred_batch_size=_get(config, "preferred_batch_size"),
            max_queue_delay_microseconds=int(_get(config, "max_queue_delay_microseconds", 0)),
            preserve_ordering=bool(_get(config, "preserve_ordering", False)),
            priority_levels=int(_get(config, "priority_levels", 0)),
            default_priority_level=int(_get(config, "default_priority_level", 0)),
            default_queue_policy=_queue_policy(default_policy) if default_policy else None,
            priority_queue_policy={int(k): _queue_policy(v) for k, v in priority.items()}
            if priority
            else None,
        )

    @classmethod
    def _warmup(cls, config: List[Dict[str, Any]]) -> List[ModelWarmup]:
        out = []
        for item in config:
            inputs = {}
            for name, spec in item["inputs"].items():
                data_type = _get(spec, "data_type")
                dtype = _dtype(
                    data_type,
                    f"Data type for {name} not defined.",
                    f"Invalid data type `{data_type}` for {name}.",
                    f"Unsupported data type `{data_type}` for {name}.",
                )
                shape = tuple(int(d) for d in spec["dims"])
                if not shape:
                    raise PyTritonModelConfigError(f"Dimension for {name} not defined.")
                inputs[name] = WarmupInput(
                    dtype=dtype,
                    shape=shape,
                    random_data=_get(spec, "random_data", False),
                    zero_data=_get(spec, "zero_data", False),
                    input_data_file=_get(spec, "input_data_file"),
                )
            out.append(
                ModelWarmup(
                    name=item["name"],
                    batch_size=_get(item, "batch_size"),
                    inputs=inputs,
                    count=item["count"],
                )
            )
        return out
