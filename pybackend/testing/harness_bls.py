"""The BLS side of a :class:`~pybackend.testing.harness.ModelHarness`: serving another
in-process model's BLS call to this one, as the server runs it (one response, or a
decoupled call's stream as the model sends it), with the server's texts for a call it
refuses before the model sees it."""

from __future__ import annotations

import json
import threading
from typing import Any

from ..utils.errors import ErrorCode, TritonError
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .bls_responses import DECOUPLED_ONLY, BlsResponses, refused_text
from .harness_errors import InferError
from .harness_streams import HarnessStreams
from .transport import FINAL


class HarnessBls(HarnessStreams):
    """BLS calls from other models in this process (the transport routes them here)."""

    def _serve_bls(self, request: InferenceRequest, decoupled_call: bool) -> Any:
        """A BLS call from another model: the response (``decoupled_call``: the
        :class:`BlsResponses` as they come), with the server's texts for a call it refuses."""
        inputs = {t.name(): t for t in request.inputs()}
        try:
            req = self.request(
                inputs,
                requested_outputs=sorted(request.requested_output_names()),
                request_id=request.request_id(),
                correlation_id=request.correlation_id(),
                parameters=json.loads(request.parameters() or "{}"),
            )
        except InferError as e:
            return _refused(self.model_name, e.message, decoupled_call)
        if self.decoupled and not decoupled_call:
            self._queued.pop(req._token, None)  # never executed: not in the statistics
            return _refused(self.model_name, DECOUPLED_ONLY.format(self.model_name), False)
        if not self.decoupled:
            (resp,) = self.execute([req])
            resp = self._checked(resp, req)
            # The response comes with FINAL: a decoupled call to it yields just that one.
            return BlsResponses.of([resp], final_alone=False) if decoupled_call else resp
        stream = BlsResponses(cancel=lambda: self._cancel_token(req._token))
        with self._cond:
            self._listeners[req._token] = lambda resp, flags: stream.put(
                None if resp is None else self._checked(resp, req), bool(flags & FINAL)
            )

        def run() -> None:
            (ret,) = self.execute([req])
            if ret is not None:  # the batch failed after what it sent: the error ends it
                with self._cond:
                    self._listeners.pop(req._token, None)
                stream.put(ret, True)

        threading.Thread(target=run, name="harness-bls", daemon=True).start()
        return stream


def _refused(model: str, message: str, decoupled_call: bool) -> Any:
    """A BLS call the server refuses before the model sees it: one error response."""
    error = InferenceResponse(error=TritonError(refused_text(model, message), ErrorCode.INTERNAL))
    return BlsResponses.of([error], final_alone=False) if decoupled_call else error
