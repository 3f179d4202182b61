"""What pb_utils needs from the process it runs in, behind one small interface.

The classes in :mod:`pybackend.utils` never import the stub. The stub installs its own
:class:`Transport` (IPC to the backend); the offline harness installs another; the
default :class:`InProcessTransport` logs to stderr and records sent responses, so
``import triton_python_backend_utils`` works anywhere.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from .errors import TritonModelException

if TYPE_CHECKING:  # pragma: no cover
    from .request import InferenceRequest
    from .response import InferenceResponse

# Set by the stub for the processes it starts (utils' own name for it: the stub imports this).
STUB_INSTANCE_ENV = "PYBACKEND_STUB_INSTANCE"
STUB_MODEL_ENV = "PYBACKEND_STUB_MODEL"
LEVEL_LETTER = {0: "I", 1: "W", 2: "E", 3: "I"}


def format_log_line(level: int, filename: str, line: int, message: str) -> str:
    """``<I|W|E>MMDD hh:mm:ss.uuuuuu <pid> <file>:<line>]  <msg>`` (Triton's stderr form)."""
    now = time.time()
    t = time.localtime(now)
    micros = int((now - int(now)) * 1_000_000)
    return (
        f"{LEVEL_LETTER.get(level, 'I')}{t.tm_mon:02d}{t.tm_mday:02d} "
        f"{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}.{micros:06d} {os.getpid()} "
        f"{os.path.basename(filename)}:{line}]  {message}"
    )


def unsupported(feature: str) -> TritonModelException:
    return TritonModelException(
        f"{feature} is not supported by this version of pybackend yet; "
        "it will arrive in a later release (see docs/compatibility.md)."
    )


class Transport:
    """Base class: every method has a safe default so a transport implements only what
    its environment can do."""

    model_dir: str = ""

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        sys.stderr.write(format_log_line(level, filename, line, message) + "\n")
        sys.stderr.flush()

    def send_response(
        self, request: "InferenceRequest", response: Optional["InferenceResponse"], flags: int
    ) -> None:
        """Deliver one response-sender ``send``; already validated by the sender."""
        raise unsupported("Sending responses outside a model instance")

    def is_cancelled(self, request: "InferenceRequest") -> bool:
        return False

    def sender_created(self, request: "InferenceRequest", sender: Any) -> None:
        """``request`` (one received from the server) just made its response sender."""

    def bls_exec(self, request: "InferenceRequest", decoupled: bool) -> Any:
        instances = os.environ.get(STUB_INSTANCE_ENV)
        if instances:
            # A process that model.py started with multiprocessing's spawn or forkserver:
            # it imported pb_utils afresh and shares nothing with the stub. A process that
            # several instances share names them all, one a line: which one started this
            # process is not known here.
            names = instances.split("\n")
            who = (
                f"instance '{names[0]}'"
                if len(names) == 1
                else "one of instances " + ", ".join(f"'{n}'" for n in names)
            )
            raise TritonModelException(
                f"BLS (InferenceRequest.exec/async_exec) is not supported in a process that "
                f"model.py of model '{os.environ.get(STUB_MODEL_ENV, '')}', {who} "
                f"started with multiprocessing's 'spawn' or "
                f"'forkserver' method (pid {os.getpid()}): such a process has no connection to "
                "the server. Start the workers that make BLS calls with the 'fork' method "
                "(multiprocessing.get_context('fork')), or make the calls in the model's own "
                "process."
            )
        raise unsupported("BLS (InferenceRequest.exec/async_exec)")

    def bls_async_exec(self, request: "InferenceRequest", decoupled: bool) -> Any:
        """An awaitable of ``bls_exec``'s result; called with the running loop current.
        This default runs ``bls_exec`` in the loop's executor."""
        import asyncio

        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.bls_exec, request, decoupled)

    def model_control(self, op: str, **kwargs: Any) -> Any:
        raise unsupported(f"Model control ({op})")

    # Custom metrics (pb_utils.MetricFamily/Metric): errors are TritonModelException with
    # the bare reason; the caller adds the operation's prefix. A family delete never raises (it
    # runs from __del__, on any thread); a metric lives as long as its family.
    def metric_family_new(self, name: str, description: str, kind: int) -> int:
        raise unsupported("Custom metrics (MetricFamily)")

    def metric_family_delete(self, family_id: int) -> None:
        pass

    def metric_new(
        self, family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
    ) -> int:
        raise unsupported("Custom metrics (MetricFamily)")

    def metric_op(self, op: str, metric_id: int, value: float) -> float:
        """``op`` is "value", "increment", "set" or "observe"; returns the value for "value"."""
        raise unsupported("Custom metrics (MetricFamily)")

    def free_memory(self) -> int:
        """Free bytes of the stub's shared memory (``c_python_backend_utils``)."""
        return 0

    def empty_array(self, shape: Tuple[int, ...], dtype: Any) -> Any:
        """An uninitialised array for ``Tensor.empty``: shared memory inside a stub (an
        output there travels without a copy), plain process memory elsewhere."""
        import numpy as np

        return np.empty(shape, dtype)


class InProcessTransport(Transport):
    """Default transport: stderr logging and an in-memory record of sent responses."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: List[Tuple["InferenceRequest", Optional["InferenceResponse"], int]] = []

    def send_response(
        self, request: "InferenceRequest", response: Optional["InferenceResponse"], flags: int
    ) -> None:
        with self.lock:
            self.sent.append((request, response, flags))


_current: Transport = InProcessTransport()
_state: Dict[str, Any] = {}


def get_transport() -> Transport:
    return _current


def set_transport(transport: Transport) -> Transport:
    """Install ``transport`` for every pb_utils object; returns the previous one."""
    global _current
    previous, _current = _current, transport
    return previous
