"""One inference request as the development server hands it to a harness, whichever
protocol brought it."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

SEQUENCE = ("sequence_id", "sequence_start", "sequence_end")
#: Request parameters the protocols use themselves; the rest reach the model in
#: ``request.parameters()``. priority and timeout (µs) act on a dynamic batcher's queue
#: (batcher.py).
RESERVED = {
    *SEQUENCE,
    "binary_data_output",
    "priority",
    "timeout",
    "triton_enable_empty_final_response",
}


@dataclass
class InferCall:
    inputs: Dict[str, np.ndarray]
    requested: List[str] = field(default_factory=list)
    binary: Dict[str, bool] = field(default_factory=dict)  # HTTP: per requested output
    binary_default: bool = False  # HTTP: binary_data_output
    request_id: str = ""
    parameters: Dict[str, Any] = field(default_factory=dict)
    sequence: Dict[str, Any] = field(default_factory=dict)
    # When it arrived: a batched request's queue time in the statistics counts from here.
    queued_ns: int = field(default_factory=time.monotonic_ns)
    # Outputs the client wants written into its shared memory: name -> (region, offset, size)
    shm_outputs: Dict[str, Tuple[str, int, int]] = field(default_factory=dict)
    priority: int = 0  # 0: the model's default priority level
    timeout_us: int = 0  # 0: the queue policy's default

    def set_parameters(self, params: Mapping[str, Any]) -> None:
        """The request's parameters: tritonclient's sequence arguments and priority, and
        the model's own."""
        self.sequence, self.parameters = split_parameters(params)
        self.priority = _count(params.get("priority"))
        self.timeout_us = _count(params.get("timeout"))


def _count(value: Any) -> int:
    """A non-negative integer parameter; 0 when absent or not a number."""
    try:
        return max(0, int(value or 0))
    except (TypeError, ValueError):
        return 0


def split_parameters(params: Mapping[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """(tritonclient's sequence arguments, the model's own parameters) of a request."""
    sequence = {k: params[k] for k in SEQUENCE if k in params}
    return sequence, {k: v for k, v in params.items() if k not in RESERVED}
