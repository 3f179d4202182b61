"""The BLS side of a :class:`~pybackend.testing.harness.ModelHarness`: serving another
in-process model's BLS call to this one, as the server runs it (one response, or a
decoupled call's stream as the model sends it), with the server's texts for a call it
refuses before the model sees it."""

from __future__ import annotations

import json
import threading
from typing import Any, Optional

from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .bls_responses import DECOUPLED_ONLY, BlsResponses, error_answer, refused_text
from .call_cycles import Call
from .harness_errors import InferError
from .harness_execute import Executor
from .harness_streams import SenderStreams
from .model_dir import ModelOnDisk
from .transport import FINAL


class BlsServer:
    """BLS calls from other models in this process (the transport routes them here) to the
    model in ``disk``, run by ``executor``, whose senders' sends ``streams`` collects."""

    def __init__(self, disk: ModelOnDisk, executor: Executor, streams: SenderStreams) -> None:
        self._disk = disk
        self._executor = executor
        self._streams = streams

    def serve(self, request: InferenceRequest, decoupled_call: bool, call: Optional[Call]) -> Any:
        """A BLS call from another model: the response (``decoupled_call``: the
        :class:`BlsResponses` as they come), with the server's texts for a call it refuses;
        ``call``, the call in the cycle registry, is served by the execute that takes it."""
        model_name, executor = self._disk.model_name, self._executor
        inputs = {t.name(): t for t in request.inputs()}
        try:
            req = executor.request(
                inputs,
                requested_outputs=sorted(request.requested_output_names()),
                request_id=request.request_id(),
                correlation_id=request.correlation_id(),
                parameters=json.loads(request.parameters() or "{}"),
            )
        except InferError as e:
            return _refused(model_name, e.message, decoupled_call)
        decoupled = self._disk.decoupled
        if decoupled and not decoupled_call:
            executor.never_executed(req)
            return _refused(model_name, DECOUPLED_ONLY.format(model_name), False)
        if not decoupled:
            (resp,) = executor.execute([req], {req._token: call} if call else None)
            resp = executor.checked(resp, req)
            # The response comes with FINAL: a decoupled call to it yields just that one.
            return BlsResponses.of([resp], final_alone=False) if decoupled_call else resp
        token = req._token
        stream = BlsResponses(cancel=lambda: self._streams.cancel(token))

        def listen(resp: Optional[InferenceResponse], flags: int) -> None:
            stream.put(None if resp is None else executor.checked(resp, req), bool(flags & FINAL))

        self._streams.listen(token, listen)

        def run() -> None:
            (ret,) = executor.execute([req])
            if ret is not None:  # the batch failed after what it sent: the error ends it
                self._streams.unlisten(token)
                stream.put(ret, True)

        threading.Thread(target=run, name="harness-bls", daemon=True).start()
        return stream


def _refused(model: str, message: str, decoupled_call: bool) -> Any:
    """A BLS call the server refuses before the model sees it: one error response."""
    return error_answer(refused_text(model, message), decoupled_call)
