"""What a decoupled BLS call returns under the offline harness: the callee's responses as
they come (a callee streaming from its threads is not waited for first), iterable again
once finished, and cancellable as the stub's own iterator is."""

from __future__ import annotations

import queue
from typing import Any, Callable, List, Optional, Tuple

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


class BlsResponses:
    def __init__(self, cancel: Optional[Callable[[], None]] = None, timeout: float = 60.0) -> None:
        self._queue: "queue.Queue[Tuple[Optional[InferenceResponse], bool]]" = queue.Queue()
        self._cache: List[InferenceResponse] = []
        self._pos = 0
        self._done = False
        self._cancel = cancel
        self._timeout = timeout

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
        self._queue.put((response, final))

    def __iter__(self) -> "BlsResponses":
        if self._done:
            self._pos = 0
        return self

    def __next__(self) -> InferenceResponse:
        if self._pos < len(self._cache):
            self._pos += 1
            return self._cache[self._pos - 1]
        if self._done:
            raise StopIteration
        try:
            resp, final = self._queue.get(timeout=self._timeout)
        except queue.Empty:
            raise TimeoutError(
                f"the callee sent no FINAL within {self._timeout:g} s (harness limit)"
            ) from None
        if final:
            self._done = True
        self._cache.append(resp if resp is not None else InferenceResponse())
        self._pos += 1
        return self._cache[-1]

    def __aiter__(self) -> "BlsResponses":
        return self.__iter__()

    async def __anext__(self) -> Any:
        import asyncio

        try:
            return await asyncio.get_running_loop().run_in_executor(None, self.__next__)
        except StopIteration:
            raise StopAsyncIteration from None

    def cancel(self) -> None:
        """Ask for the call to be cancelled: the callee's ``is_cancelled()`` turns true."""
        if not self._done and self._cancel is not None:
            self._cancel()
