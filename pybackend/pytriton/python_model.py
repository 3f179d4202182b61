"""PyTriton-style inference callables (and the decorators) inside a plain model.py::

    from pybackend.pytriton.decorators import batch
    from pybackend.pytriton.python_model import CallableAdapter

    @batch
    def infer(**inputs):
        return {"OUTPUT0": inputs["INPUT0"] * 2}

    class TritonPythonModel:
        def initialize(self, args):
            self.adapter = CallableAdapter(infer, args["model_config"])

        def execute(self, requests):
            return self.adapter.execute(requests)

The same code as an attached instance runs (pybackend/pytriton/_callable.py): requests
become dicts of numpy arrays, the callable's dicts become responses, decoupled models send
through the response senders. Coroutines and async generators need an event loop of the
instance: use ``async def execute`` there instead.
"""

from __future__ import annotations

import json
from typing import Any, Callable, List, Optional, Union

from ._callable import CallableModel
from ._context import TritonContext, config_from_json
from .exceptions import PyTritonInvalidOperationError


class CallableAdapter:
    def __init__(
        self,
        infer_func: Callable[..., Any],
        model_config: Union[str, dict],
        strict: bool = False,
    ) -> None:
        config = json.loads(model_config) if isinstance(model_config, str) else model_config
        self.config = config_from_json(config)
        self._model = CallableModel(
            self.config, TritonContext(), infer_func, strict, _NoLoop(), _no_fatal
        )

    def execute(self, requests: List[Any]) -> Optional[List[Any]]:
        return self._model.execute(requests)


class _NoLoop:
    def run_coroutine(self, coro: Any) -> Any:
        coro.close()
        raise PyTritonInvalidOperationError(
            "CallableAdapter runs plain functions and generators; for a coroutine or async "
            "generator write `async def execute` in the model instead."
        )


def _no_fatal(text: str) -> None:
    """A model.py has no Triton object to stop: the error response is all."""
