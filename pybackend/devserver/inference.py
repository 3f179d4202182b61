"""One inference request run on a served model through its harness, with the harness's
refusals (the server's texts and codes) turned into :class:`ServeError`."""

from __future__ import annotations

import queue
import threading
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np

from ..testing.harness_errors import InferError
from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError
from .models import Served, revive

#: tritonserver's answer to a decoupled model on HTTP's ``/infer`` (2.51, status 501).
DECOUPLED_ON_HTTP = "HTTP end point doesn't support models with decoupled transaction policy"


def _kwargs(call: InferCall) -> Dict[str, Any]:
    return {
        "requested_outputs": list(call.requested),
        "request_id": call.request_id,
        "parameters": call.parameters or None,
        **call.sequence,
    }


def infer(served: Served, call: InferCall) -> Dict[str, np.ndarray]:
    """The outputs of one request to a model that answers with one response."""
    if served.model.decoupled:
        raise ServeError(DECOUPLED_ON_HTTP, ErrorCode.UNSUPPORTED)
    try:
        with served.lock:  # one instance: executes run one after the other
            revive(served)
            return served.model.infer(call.inputs, **_kwargs(call))
    except InferError as e:
        raise ServeError(e.message, e.code) from None


Streamed = Tuple[Optional[Dict[str, np.ndarray]], Optional[ServeError]]


def stream(served: Served, call: InferCall, timeout: float = 3600.0) -> Iterator[Streamed]:
    """The responses of one request as the model sends them, each ``(outputs, None)``, and
    ``(None, error)`` last where it failed; a model that is not decoupled yields its one
    response."""
    results: "queue.Queue[Optional[Streamed]]" = queue.Queue()

    def run() -> None:
        try:
            with served.lock:
                revive(served)
                served.model.infer_stream(
                    call.inputs,
                    timeout,
                    on_response=lambda outputs: results.put((outputs, None)),
                    **_kwargs(call),
                )
        except InferError as e:
            results.put((None, ServeError(e.message, e.code)))
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
