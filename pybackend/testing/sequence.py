"""What tritonserver's sequence batcher does to a request before the model sees it, for the
offline harness: the correlation id and START/END flags a client sets (tritonclient's
``sequence_id``, ``sequence_start``, ``sequence_end``), the server's refusals of a request
that names no sequence or continues one that never started, and the control inputs
(``sequence_batching.control_input``) it adds, and its idle timeout: a sequence with no
request for ``max_sequence_idle_microseconds`` (1 s when unset) is ended, so the next
request must START it again. Checked against tritonserver 2.51 by
tests/testing/test_offline_conformance.py and tests/devserver/test_sequence_idle_differential.py.
Not simulated: routing to instances, batching of several sequences, string correlation ids
with control inputs."""

from __future__ import annotations

import time
from typing import Any, Dict, Mapping, Tuple, Union

import numpy as np

from ..utils.dtypes import triton_string_to_numpy
from ..utils.errors import ErrorCode, TritonModelException
from .harness_errors import InferError

START = 1  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
END = 2  # TRITONSERVER_REQUEST_FLAG_SEQUENCE_END

CorrelationId = Union[int, str]

# control kind -> the false/true field it may carry and the numpy dtype of that field
_FALSE_TRUE = (
    ("int32_false_true", np.int32),
    ("fp32_false_true", np.float32),
    ("bool_false_true", np.bool_),
)


def request_fields(
    correlation_id: CorrelationId = 0,
    sequence_id: CorrelationId = 0,
    sequence_start: bool = False,
    sequence_end: bool = False,
) -> Tuple[CorrelationId, int]:
    """(correlation id, flags) of a request, from the client's arguments."""
    flags = (START if sequence_start else 0) | (END if sequence_end else 0)
    return (sequence_id if sequence_id not in (0, "") else correlation_id), flags


class Sequences:
    """The sequence batcher of one model: which sequences are open."""

    def __init__(self, config: Mapping[str, Any], model_name: str) -> None:
        batching = config.get("sequence_batching")
        # An iterative sequence is one request (request rescheduling): nothing to check.
        self.enabled = batching is not None and not batching.get("iterative_sequence", False)
        self.controls = (batching or {}).get("control_input", []) if self.enabled else []
        self.batched = int(config.get("max_batch_size", 0)) > 0
        self.model_name = model_name
        idle_us = int((batching or {}).get("max_sequence_idle_microseconds", 0) or 0)
        self.idle_s = idle_us / 1e6 if idle_us > 0 else 1.0  # tritonserver's default
        self.open: Dict[CorrelationId, float] = {}  # -> monotonic time of its last request

    def admit(self, correlation_id: CorrelationId, flags: int) -> Dict[str, np.ndarray]:
        """Check a request as the server does (raises :class:`InferError` with its text);
        returns the control inputs to add to it."""
        if not self.enabled:
            return {}
        if correlation_id in (0, ""):
            raise InferError(
                f"inference request to model '{self.model_name}' must specify a non-zero or "
                "non-empty correlation ID",
                ErrorCode.INVALID_ARG,
            )
        now = time.monotonic()
        last = self.open.get(correlation_id)
        if last is not None and now - last > self.idle_s:
            del self.open[correlation_id]  # idle too long: the server ended it
        if not flags & START and correlation_id not in self.open:
            raise InferError(
                f"inference request for sequence {correlation_id} to model "
                f"'{self.model_name}' must specify the START flag on the first request of the "
                "sequence",
                ErrorCode.INVALID_ARG,
            )
        self.open[correlation_id] = now
        if flags & END:
            del self.open[correlation_id]
        return {c["name"]: self._control(c, correlation_id, flags) for c in self.controls}

    def _control(
        self, control_input: Mapping[str, Any], correlation_id: CorrelationId, flags: int
    ) -> np.ndarray:
        shape = (1, 1) if self.batched else (1,)
        (control,) = control_input["control"][:1]
        kind = control.get("kind", "CONTROL_SEQUENCE_START")
        if kind == "CONTROL_SEQUENCE_CORRID":
            dtype = triton_string_to_numpy(control.get("data_type", "TYPE_UINT64"))
            if isinstance(correlation_id, str) or dtype == np.object_:
                raise TritonModelException(
                    f"the harness does not simulate the {control_input['name']} control input "
                    f"(a {control.get('data_type')} correlation id) for correlation id "
                    f"{correlation_id!r}: tritonserver 2.51 itself mangles string ids there"
                )
            return np.full(shape, correlation_id, dtype)
        on = {
            "CONTROL_SEQUENCE_START": bool(flags & START),
            "CONTROL_SEQUENCE_END": bool(flags & END),
            "CONTROL_SEQUENCE_READY": True,  # a request is in this batch slot
        }.get(kind)
        if on is None:
            raise TritonModelException(f"the harness does not simulate control kind {kind}")
        field, dtype = _false_true(control)
        return np.full(shape, control[field][1 if on else 0], dtype)


def _false_true(control: Mapping[str, Any]) -> Tuple[str, Any]:
    for field, dtype in _FALSE_TRUE:
        if len(control.get(field) or ()) == 2:
            return field, dtype
    raise TritonModelException(f"control {control} has no int32/fp32/bool false/true values")
