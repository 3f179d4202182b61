"""What a decoupled BLS call returns under the offline harness: the stub's own
ResponseIterator (responses as they come, iterable again once finished, ``async for``,
``cancel()``), fed by the harness instead of the backend."""

from __future__ import annotations

import logging
from typing import Any, Callable, List, Optional

from ..stub.response_iterator import Call, ResponseIterator
from ..utils.errors import ErrorCode, TritonError
from ..utils.response import InferenceResponse

#: The server's words for a plain exec() of a decoupled model (the stray quote is theirs).
DECOUPLED_ONLY = (
    "Model {0} is using the decoupled. The current BLS request call doesn't support models "
    "using the decoupled transaction policy. Please use 'decoupled=True' argument to the "
    "'exec' or 'async_exec' calls for decoupled models.'"
)


def refused_text(model: str, message: str) -> str:
    """A BLS call the server refuses before the callee sees it (bad inputs, say)."""
    return f"Model {model} - Error when running inference: {message}"


def error_answer(message: str, decoupled: bool, code: ErrorCode = ErrorCode.INTERNAL) -> Any:
    """A BLS call's error response (INTERNAL unless said) as its caller gets it: the
    response, or for a decoupled call the whole stream."""
    error = InferenceResponse(error=TritonError(message, code))
    return BlsResponses.of([error], final_alone=False) if decoupled else error


def fake_answer(fake: Callable[[Any], Any], request: Any) -> List[InferenceResponse]:
    """A BLS fake's answer to ``request`` (one response, or a list for a decoupled call) as
    the calling model gets it in every offline engine: a fake that raises, or returns
    something else than responses, is an INTERNAL error response that says so."""
    try:
        result = fake(request)
        items = list(result) if isinstance(result, (list, tuple)) else [result]
        for item in items:
            if not isinstance(item, InferenceResponse):
                raise TypeError(f"a BLS fake must return pb_utils.InferenceResponse, got {item!r}")
        return items
    except Exception as e:  # noqa: BLE001 - a fake may raise anything: the caller's error
        error = TritonError(f"{type(e).__name__}: {e}", ErrorCode.INTERNAL)
        return [InferenceResponse(error=error)]


class _Canceller:
    """Stands in for the stub's BLS client, whose cancel(cid) asks the backend and whose warn()
    writes to the server's log."""

    def __init__(self, cancel: Optional[Callable[[], None]]) -> None:
        self._cancel = cancel

    def cancel(self, cid: int) -> None:
        if self._cancel is not None:
            self._cancel()

    def warn(self, text: str) -> None:
        logging.getLogger("pybackend.testing").warning(text)


class BlsResponses(ResponseIterator):
    def __init__(self, cancel: Optional[Callable[[], None]] = None) -> None:
        super().__init__(Call(_Canceller(cancel), None))

    @classmethod
    def of(cls, responses: List[InferenceResponse], final_alone: bool = True) -> "BlsResponses":
        """Responses known in full: each, then FINAL (alone, as an empty response, when
        ``final_alone``; else with the last response)."""
        it = cls()
        for i, resp in enumerate(responses):
            it.put(resp, final=not final_alone and i == len(responses) - 1)
        if final_alone or not responses:
            it.put(None, final=True)
        return it

    def put(self, response: Optional[InferenceResponse], final: bool) -> None:
        """The callee sent ``response`` (None: a FINAL flag alone)."""
        self._call.push(response, final)
