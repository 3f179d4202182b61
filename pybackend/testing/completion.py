"""What a model's ``auto_complete_config`` makes of its configuration, without creating
the model (`pybackend config` writes it into config.pbtxt): the model imported as the
stub imports it and the class's method called as the server calls it."""

from __future__ import annotations

import json
from typing import Any, Dict

from ..errors import PybackendError
from ..stub import loader
from ..stub.tracebacks import MODEL_ERRORS, format_exception
from .harness import ModelHarness
from .transport import install


class CompletionError(PybackendError):
    """model.py could not be imported, or its auto_complete_config failed."""


def has_auto_complete(harness: ModelHarness) -> bool:
    return _run(harness, lambda module: hasattr(loader.model_class(module), "auto_complete_config"))


def completed_config(harness: ModelHarness) -> Dict[str, Any]:
    """The configuration ``auto_complete_config`` returned (as the server's JSON, the
    configuration given to it where the model has no such method). What fails raises
    :class:`CompletionError` with the text the server's load failure has."""

    def complete(module: Any) -> Dict[str, Any]:
        init = {"model_config": json.dumps(harness.config), "model_name": harness.model_name}
        return dict(json.loads(loader.auto_complete(module, init)))

    return dict(_run(harness, complete))


def _run(harness: ModelHarness, step: Any) -> Any:
    # Registered as a started harness is, so that pb_utils (Logger...) works in the method.
    t = harness._transport
    with t.lock:
        t.harnesses.append(harness)
    install(t)
    try:
        with harness._running():
            return step(harness._import())
    except loader.LoadError as e:
        raise CompletionError(f"model '{harness.model_name}': {e}") from None
    except MODEL_ERRORS as e:  # the model's own code: any exception is its error
        raise CompletionError(f"model '{harness.model_name}': {format_exception(e)}") from None
    finally:
        harness.close()  # no model was created: nothing is finalized
