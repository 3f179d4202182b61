"""The calls every engine answers, stated once: a test written against :class:`Engine` runs
its model in this process (:class:`ModelHarness`), in a real stub process
(:class:`StubModel`) or through a real tritonserver (:class:`ServerModel`) alike (the
pytest plugin's ``triton_model``); :class:`OfflineEngine` adds what the two engines without
a server share. mypy checks each engine against these (tests/utils/test_pb_typing.py)."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Protocol, Sequence, TypeVar, Union

from ..stub.returns import OutputMismatch
from .harness_errors import InferError
from .results import Outputs
from .statistics import InferenceStatistics
from .transport import LogRecord

#: A request's inputs by name: arrays, or anything ``numpy.asarray`` takes.
Inputs = Mapping[str, Any]

E = TypeVar("E", bound="Engine")


class Engine(Protocol):
    """A started model a client talks to."""

    #: The model's name, as a client names it.
    model_name: str
    #: Outputs that differed from config.pbtxt in responses the server passes on (each also
    #: an OutputMismatchWarning); see pybackend.stub.returns.
    output_mismatches: List[OutputMismatch]

    @property
    def config(self) -> Dict[str, Any]:
        """The model's configuration as the server holds it (completed at load)."""

    def start(self: E) -> E:
        """Load the model (``auto_complete_config``, ``initialize``, warmup)."""

    def close(self) -> None:
        """Unload it (``finalize``)."""

    def __enter__(self: E) -> E: ...

    def __exit__(self, *exc: object) -> None: ...

    def infer(
        self,
        inputs: Inputs,
        *,
        requested_outputs: Sequence[str] = ...,
        request_id: str = ...,
        parameters: Optional[Mapping[str, Any]] = ...,
        sequence_id: Union[int, str] = ...,
        sequence_start: bool = ...,
        sequence_end: bool = ...,
        timeout: float = ...,
    ) -> Outputs:
        """One request; its outputs by name (only ``requested_outputs`` when given). An
        error response raises :class:`InferError` with its message; no answer within
        ``timeout`` seconds of the call, NoResponse (an InferError). The sequence arguments
        are tritonclient's. A decoupled model's is refused (UNSUPPORTED), as tritonserver
        refuses it: use :meth:`infer_stream`."""

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = ...,
        options: Optional[Sequence[Mapping[str, Any]]] = ...,
        timeout: float = ...,
    ) -> List[Union[Outputs, InferError]]:
        """Several requests at once (offline: in one ``execute``, as the dynamic batcher
        hands them over). Per request: its outputs, or its error as an :class:`InferError`
        (returned, not raised; no answer within ``timeout`` seconds: NoResponse)."""

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = ...,
        cancel_after: Optional[int] = ...,
        on_response: Optional[Callable[[Outputs], None]] = ...,
        cancel_event: Optional[threading.Event] = ...,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, as outputs by name, until its
        FINAL (at most ``timeout`` seconds). ``cancel_after=n``: the client cancels once
        ``n`` responses came; ``on_response``: called with each as it comes;
        ``cancel_event``: once set, the client cancels; ``kwargs``: the request's id,
        sequence id and flags, ..."""


class OfflineEngine(Engine, Protocol):
    """A model run without a server, from its directory (ModelHarness, StubModel)."""

    model_dir: Path
    version: int
    #: The instance's name, as the server names it.
    instance_name: str
    #: What tritonserver's statistics endpoint would say of the model.
    statistics: InferenceStatistics

    @property
    def decoupled(self) -> bool: ...

    @property
    def logs(self) -> List[LogRecord]:
        """What ``pb_utils.Logger`` logged, in order."""
