"""pb_utils: the classes and helpers ``model.py`` uses, shared by the stub and the
offline harness (they differ only in the installed :mod:`~pybackend.utils.transport`).
``triton_python_backend_utils`` re-exports this namespace."""

from __future__ import annotations

from .batching import RequestBatch, batch_requests
from .bytes_codec import deserialize_bytes_tensor, serialize_byte_tensor
from .dtypes import (
    TRITON_STRING_TO_NUMPY,
    numpy_to_triton_type,
    triton_string_to_numpy,
    triton_to_numpy_type,
)
from .errors import TritonError, TritonModelException
from .helpers import (
    get_input_config_by_name,
    get_input_tensor_by_name,
    get_model_dir,
    get_output_config_by_name,
    get_output_tensor_by_name,
    using_decoupled_model_transaction_policy,
)
from .logger import Logger
from .memory import TRITONSERVER_MEMORY_CPU, TRITONSERVER_MEMORY_GPU, MemoryType, PreferredMemory
from .metrics import Metric, MetricFamily, MetricKind
from .model_config import ModelConfig
from .model_control import is_model_ready, load_model, unload_model
from .process_shared import shared
from .request import (
    TRITONSERVER_REQUEST_RELEASE_ALL,
    TRITONSERVER_REQUEST_RELEASE_RESCHEDULE,
    InferenceRequest,
    InferenceTrace,
)
from .response import InferenceResponse
from .senders import TRITONSERVER_RESPONSE_COMPLETE_FINAL, InferenceResponseSender
from .tensor import Tensor

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2

__all__ = [
    "shared",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_START",
    "TRITONSERVER_REQUEST_FLAG_SEQUENCE_END",
    "TRITONSERVER_RESPONSE_COMPLETE_FINAL",
    "TRITONSERVER_REQUEST_RELEASE_ALL",
    "TRITONSERVER_REQUEST_RELEASE_RESCHEDULE",
    "TRITON_STRING_TO_NUMPY",
    "TRITONSERVER_MEMORY_GPU",
    "TRITONSERVER_MEMORY_CPU",
    "serialize_byte_tensor",
    "deserialize_bytes_tensor",
    "get_input_tensor_by_name",
    "get_output_tensor_by_name",
    "get_input_config_by_name",
    "get_output_config_by_name",
    "using_decoupled_model_transaction_policy",
    "triton_to_numpy_type",
    "numpy_to_triton_type",
    "triton_string_to_numpy",
    "ModelConfig",
    "TritonError",
    "TritonModelException",
    "Tensor",
    "InferenceRequest",
    "InferenceResponse",
    "InferenceResponseSender",
    "InferenceTrace",
    "Logger",
    "PreferredMemory",
    "MemoryType",
    "Metric",
    "MetricFamily",
    "MetricKind",
    "load_model",
    "unload_model",
    "is_model_ready",
    "get_model_dir",
    "batch_requests",
    "RequestBatch",
]
