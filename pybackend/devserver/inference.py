"""One inference request run on a served model through its harness, with the harness's
refusals (the server's texts and codes) turned into :class:`ServeError`."""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Iterator, List, Optional, Tuple

import numpy as np

from ..testing.harness_errors import DECOUPLED_ON_HTTP, InferError
from ..testing.inputs import check_inputs
from ..utils.errors import ErrorCode
from ..utils.tensor import Tensor
from .batcher import Batcher, QueueRules, batching_of
from .call import InferCall
from .errors import ServeError
from .models import Served

#: How long a request waits for its model: a client of tritonserver waits for a slow model
#: (the harness's calls are bounded, by 30 s unless told).
WAIT_S = 3600.0


def _kwargs(call: InferCall) -> Dict[str, Any]:
    return {
        "requested_outputs": list(call.requested),
        "request_id": call.request_id,
        "parameters": call.parameters or None,
        **call.sequence,
    }


def infer(served: Served, call: InferCall) -> Dict[str, np.ndarray]:
    """The outputs of one request to a model that answers with one response. Requests run
    side by side up to the harness, which runs one ``execute`` at a time, as one instance;
    a model with a dynamic batcher gets the requests that meet there in one ``execute``."""
    if served.decoupled:
        raise ServeError(DECOUPLED_ON_HTTP, ErrorCode.UNSUPPORTED)
    with served.use():
        batcher = _batcher(served)
        if batcher is not None:
            return batcher.submit(call)
        try:
            with served.instance(call.sequence.get("sequence_id")) as model:
                return model.infer(call.inputs, timeout=WAIT_S, **_kwargs(call))
        except InferError as e:
            raise ServeError(e.message, e.code) from None


def _batcher(served: Served) -> Optional[Batcher]:
    """The model's dynamic batcher, started with its first request."""
    with served.lock:
        if served.batcher is None:
            batching = batching_of(served.config)
            if batching is not None:
                max_batch, delay_s, preferred = batching
                served.batcher = Batcher(
                    served.name,
                    max_batch,
                    delay_s,
                    lambda calls: _run_batch(served, calls),
                    workers=len(served.instances),  # a batch per instance at a time
                    preferred=preferred,
                    rules=QueueRules.of(served.config["dynamic_batching"]),
                    # The instances share one statistics entry (models.py).
                    on_expired=lambda call: served.instances[0].statistics.record_expired(
                        call.queued_ns
                    ),
                )
        return served.batcher


def _run_batch(served: Served, calls: List[InferCall]) -> List[Any]:
    options = [
        {
            "requested_outputs": c.requested,
            "request_id": c.request_id,
            "parameters": c.parameters or None,
            "queued_ns": c.queued_ns,
        }
        for c in calls
    ]
    with served.instance() as model:
        answers = model.infer_batch([c.inputs for c in calls], options=options, timeout=WAIT_S)
    return [ServeError(a.message, a.code) if isinstance(a, InferError) else a for a in answers]


def check(served: Served, call: InferCall) -> None:
    """The server's checks of the inputs, before anything runs (a stream that fails them
    never starts: the client gets a plain error, not an event)."""
    tensors = [Tensor(name, array) for name, array in call.inputs.items()]
    try:
        check_inputs(served.config, served.name, tensors, call.request_id)
    except InferError as e:
        raise ServeError(e.message, e.code) from None


Streamed = Tuple[Optional[Dict[str, np.ndarray]], Optional[ServeError]]


def stream(
    served: Served,
    call: InferCall,
    cancel: Optional[threading.Event] = None,
    timeout: float = WAIT_S,
) -> Iterator[Streamed]:
    """The responses of one request as the model sends them, each ``(outputs, None)``, and
    ``(None, error)`` last where it failed; a model that is not decoupled yields its one
    response. Setting ``cancel`` is the client's cancel: ``is_cancelled()`` turns true."""
    results: "queue.Queue[Optional[Streamed]]" = queue.Queue()

    def run() -> None:
        try:
            with served.use(), served.instance(call.sequence.get("sequence_id")) as model:
                model.infer_stream(
                    call.inputs,
                    timeout,
                    on_response=lambda outputs: results.put((outputs, None)),
                    cancel_event=cancel,
                    **_kwargs(call),
                )
        except InferError as e:
            results.put((None, ServeError(e.message, e.code)))
        except ServeError as e:  # unloaded meanwhile
            results.put((None, e))
        except Exception as e:  # noqa: BLE001 - a broken harness must end the stream too
            results.put((None, ServeError(f"{type(e).__name__}: {e}")))
        finally:
            results.put(None)

    threading.Thread(target=run, name="devserver-stream", daemon=True).start()
    while True:
        item = results.get()
        if item is None:
            return
        yield item
