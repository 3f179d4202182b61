"""``pb_utils.InferenceRequest``: the requests ``execute`` receives, and BLS requests a
model builds itself."""

from __future__ import annotations

from typing import Any, List, Optional, Sequence, Set, Union

from . import transport as _transport
from .arguments import (
    as_bool,
    as_instance,
    as_instance_list,
    as_int,
    as_string,
    as_string_list,
    expect_dict,
    refuse,
)
from .errors import TritonModelException
from .memory import PreferredMemory
from .response import parameters_to_json
from .senders import InferenceResponseSender
from .tensor import Tensor

TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

_MISSING: Any = object()


class InferenceTrace:
    """Trace handle of a request; pass ``request.trace()`` to a BLS request to chain it."""

    __slots__ = ("_context", "_token")

    def __init__(self, context: Optional[str] = None, token: int = 0) -> None:
        self._context = context
        self._token = token  # the incoming request it belongs to (0: none)

    def get_context(self) -> Optional[str]:
        return self._context


class InferenceRequest:
    """One inference request. Incoming requests are built by the stub (or the harness)
    with :meth:`_incoming`; calling the constructor builds a BLS request."""

    __slots__ = (
        "_token",
        "_request_id",
        "_correlation_id",
        "_inputs",
        "_requested",
        "_model_name",
        "_model_version",
        "_flags",
        "_timeout",
        "_parameters",
        "_preferred_memory",
        "_trace",
        "_release_flags",
        "_decoupled",
        "_sender",
        "_cancelled",
        "__weakref__",
    )

    def __init__(
        self,
        request_id: str = "",
        correlation_id: Union[int, str] = 0,
        inputs: Sequence[Tensor] = _MISSING,
        requested_output_names: Sequence[str] = _MISSING,
        model_name: str = _MISSING,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory: PreferredMemory = _MISSING,
        trace: InferenceTrace = _MISSING,
        parameters: Optional[dict] = None,
    ) -> None:
        # pybind11 converts every argument before the binding's body runs: all TypeErrors
        # come before the body's own checks (TritonModelException).
        fn = "InferenceRequest"
        for arg, value in (
            ("inputs", inputs),
            ("requested_output_names", requested_output_names),
            ("model_name", model_name),
        ):
            if value is _MISSING:
                raise TypeError(f"{fn}() missing required argument '{arg}'")
        request_id = as_string(request_id, fn, "request_id")
        if correlation_id is None:
            raise refuse(fn, "correlation_id", "an int or a str", correlation_id)
        tensors = as_instance_list(inputs, Tensor, fn, "inputs", "pb_utils.Tensor")
        names = as_string_list(requested_output_names, fn, "requested_output_names")
        model_name = as_string(model_name, fn, "model_name")
        model_version = as_int(model_version, fn, "model_version", "int64")
        flags = as_int(flags, fn, "flags", "uint32")
        timeout = as_int(timeout, fn, "timeout", "uint64")
        # Left out, both stay None (a BLS call per request builds one each time): the
        # request then goes with the default memory and no trace, as with the defaults
        # (bls.exec_desc), and trace() makes the default object when asked.
        pm: Optional[PreferredMemory] = None
        if preferred_memory is not _MISSING:
            pm = as_instance(
                preferred_memory,
                PreferredMemory,
                fn,
                "preferred_memory",
                "pb_utils.PreferredMemory",
            )
        tr: Optional[InferenceTrace] = None
        if trace is not _MISSING:
            tr = as_instance(trace, InferenceTrace, fn, "trace", "request.trace()")
        # The body's checks, the original's texts.
        if isinstance(correlation_id, int):  # bool included, as the original
            if not 0 <= correlation_id < 1 << 64:
                raise TritonModelException("Correlation ID must be integer or string")
            correlation_id = int(correlation_id)
        elif isinstance(correlation_id, str):
            correlation_id = str(correlation_id)
        else:
            raise TritonModelException("Correlation ID must be integer or string")
        for t in tensors:
            if t is None:
                raise TritonModelException(
                    f"Input tensor for request with id '{request_id}' and model name "
                    f"'{model_name}' "
                    "should not be empty."
                )
        for n in names:
            if not n:
                raise TritonModelException(
                    f"Requested output name for request with id '{request_id}' and model name "
                    f"'{model_name}' should not be empty."
                )
        if parameters is not None:
            expect_dict(parameters)
        self._token = 0
        self._request_id = request_id
        self._correlation_id = correlation_id
        # No None left. Not typing.cast: subscripting List costs a call per request.
        self._inputs: List[Tensor] = tensors  # type: ignore[assignment]
        self._requested: Sequence[str] = names
        self._model_name = model_name
        self._model_version = model_version
        self._flags = flags
        self._timeout = timeout
        self._parameters = parameters_to_json(parameters) or "{}"
        self._preferred_memory: Optional[PreferredMemory] = pm
        self._trace: Optional[InferenceTrace] = tr
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._decoupled = False
        self._sender: Optional[InferenceResponseSender] = None
        self._cancelled = False

    @classmethod
    def _incoming(
        cls,
        token: int,
        request_id: str,
        correlation_id: Union[int, str],
        inputs: List[Tensor],
        requested_output_names: Sequence[str],
        flags: int,
        timeout: int,
        parameters: str,
        decoupled: bool,
        model_name: str = "",
        model_version: int = -1,
        trace_context: Optional[str] = None,
    ) -> "InferenceRequest":
        """A request received from the server (no validation: the server already did);
        ``trace_context``: its OpenTelemetry context, when the server traces it."""
        r = cls.__new__(cls)
        r._token = token
        r._request_id = request_id
        r._correlation_id = correlation_id
        r._inputs = inputs
        r._requested = requested_output_names
        r._model_name = model_name
        r._model_version = model_version
        r._flags = flags
        r._timeout = timeout
        r._parameters = parameters or "{}"
        r._preferred_memory = None
        r._trace = InferenceTrace(trace_context, token) if trace_context else None
        r._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        r._decoupled = decoupled
        r._sender = None
        r._cancelled = False
        return r

    # ------------------------------------------------------------------ accessors

    def inputs(self) -> List[Tensor]:
        # A new list each call, as the original's binding converts its vector: a model that
        # pops from it or clears it changes nothing of the request.
        return list(self._inputs)

    def request_id(self) -> str:
        return self._request_id

    def correlation_id(self) -> Union[int, str]:
        return self._correlation_id

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int, /) -> None:  # positional only, as the original
        self._flags = as_int(flags, "set_flags", "flags", "uint32")

    def timeout(self) -> int:
        return self._timeout

    def parameters(self) -> str:
        return self._parameters

    def model_name(self) -> str:
        return self._model_name

    def trace(self) -> InferenceTrace:
        if self._trace is None:
            self._trace = InferenceTrace(None, self._token)
        return self._trace

    def requested_output_names(self) -> Set[str]:
        return set(self._requested)

    def get_response_sender(self) -> InferenceResponseSender:
        sender = self._sender
        if sender is None:
            sender = self._sender = InferenceResponseSender(self, self._decoupled)
            if self._token:
                _transport._current.sender_created(self, sender)
        return sender

    def is_cancelled(self) -> bool:
        if not self._cancelled:
            self._cancelled = bool(_transport._current.is_cancelled(self))
        return self._cancelled

    def set_release_flags(self, flags: int, /) -> None:
        # Any uint32, as the original takes it: exactly RELEASE_RESCHEDULE reschedules the
        # request, any other value releases it as RELEASE_ALL does (stub/returns.py, the
        # backend's executor).
        self._release_flags = int(as_int(flags, "set_release_flags", "flags", "uint32"))

    def release_flags(self) -> int:
        return self._release_flags

    # ------------------------------------------------------------------ BLS

    def exec(self, decoupled: bool = False) -> Any:
        """Run this request on ``model_name`` and wait: an ``InferenceResponse`` (errors
        come back in it, not raised), or a ``ResponseIterator`` when ``decoupled``."""
        return _transport._current.bls_exec(self, as_bool(decoupled, "exec", "decoupled"))

    def async_exec(self, decoupled: bool = False) -> Any:
        """Awaitable form of :meth:`exec`; needs a running asyncio loop."""
        import asyncio  # here, not at import time: asyncio costs ~15 ms of stub start

        decoupled = as_bool(decoupled, "async_exec", "decoupled")
        asyncio.get_running_loop()  # RuntimeError without one, as the original
        return _transport._current.bls_async_exec(self, decoupled)

    def __repr__(self) -> str:
        return (
            f"InferenceRequest(id={self._request_id!r}, inputs={[t.name() for t in self._inputs]})"
        )
