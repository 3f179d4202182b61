"""`pybackend validate`: a model directory or repository checked offline for what
tritonserver and the backend would refuse at load (and, with ``--run``, for what the model
returns); see docs/cli.md."""

from .findings import ERROR, NOTE, WARNING, Finding, ModelReport
from .repository import ValidateError, validate, validate_model

__all__ = [
    "ERROR",
    "NOTE",
    "WARNING",
    "Finding",
    "ModelReport",
    "ValidateError",
    "validate",
    "validate_model",
]
