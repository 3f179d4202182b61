"""Outputs as the server treats them: which ones Triton asks the model for, and how the
offline engines report an output that differs from config.pbtxt. The rules themselves are
the stub's (:mod:`pybackend.stub.returns`): the server passes such an output on as the
model made it (as the original backend does), or refuses it under
``PYBACKEND_STRICT_OUTPUTS``; offline, a passed mismatch is also reported, as an
:class:`OutputMismatchWarning` and in the engine's ``output_mismatches`` list."""

from __future__ import annotations

import warnings
from typing import Any, Collection, List, Mapping, Sequence

from ..stub.returns import OutputMismatch, OutputRules
from ..utils.errors import ErrorCode
from .harness_errors import InferError
from .inputs import triton_code


def requested_outputs(
    config: Mapping[str, Any], requested: Sequence[str], model_name: str
) -> List[str]:
    """What Triton asks the model for: the request's outputs, or every declared output
    when the client names none (the model sees them in ``requested_output_names()``). An
    output the config does not declare is refused as the server refuses it."""
    declared = [str(o["name"]) for o in config.get("output", [])]
    for name in requested:
        if name not in declared:
            raise InferError(
                f"unexpected inference output '{name}' for model '{model_name}'",
                ErrorCode.INVALID_ARG,
            )
    return list(requested) if requested else declared


def is_requested(name: str, requested: Collection[str]) -> bool:
    """Whether the client gets output ``name`` of a response: only the requested ones, as
    the backend sends them. ``requested`` is what Triton asked the model for (every
    declared output when the client named none), so it is empty only for a model that
    declares no outputs, whose responses then reach the client without any (observed on
    the original; csrc/backend/response_writer.cc holds the backend to the same)."""
    return name in requested


class OutputMismatchWarning(UserWarning):
    """An output differs from config.pbtxt (data type, shape, or not declared) and the
    server passes it on anyway, as the original backend does: clients get what the model
    returned, which is seldom what was meant. ``mismatch`` holds the details. Set the model
    config parameter ``PYBACKEND_STRICT_OUTPUTS: "true"`` to make it an error instead."""

    def __init__(self, mismatch: OutputMismatch) -> None:
        super().__init__(
            f"{mismatch.text} (the server passes it on as it is; "
            'PYBACKEND_STRICT_OUTPUTS: "true" makes this an error)'
        )
        self.mismatch = mismatch


def array_mismatches(rules: OutputRules, outputs: Mapping[str, Any]) -> List[OutputMismatch]:
    """The mismatches among ``outputs`` (name -> array: those that go to the client)."""
    return rules.mismatches((name, triton_code(a), a.shape) for name, a in outputs.items())


def report_mismatches(found: Sequence[OutputMismatch], into: List[OutputMismatch]) -> None:
    """Each of ``found`` (in a response the server passes on) goes to ``into`` (an engine's
    ``output_mismatches``) and is warned about."""
    for mismatch in found:
        into.append(mismatch)
        warnings.warn(OutputMismatchWarning(mismatch), stacklevel=3)
