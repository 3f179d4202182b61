"""The statistics extension: ``GET /v2/models[/<m>[/versions/<v>]]/stats`` and gRPC's
``ModelStatistics``, answered from the counters each model's harness keeps as tritonserver
counts them (``pybackend.testing.statistics``), so perf_analyzer and dashboards that read
them work against the development server."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ..utils.errors import ErrorCode
from .errors import ServeError
from .models import Served, ServedModels

# tritonserver 2.51's texts (status 400 on HTTP, INVALID_ARGUMENT on gRPC).
NOT_AVAILABLE = "requested model '{}' is not available"
VERSION_NOT_AVAILABLE = "requested model version is not available for model '{}'"


def model_statistics(
    models: ServedModels, name: str = "", version: Optional[str] = None
) -> Dict[str, Any]:
    """``{"model_stats": [...]}`` for the model ``name`` (every ready model when empty)."""
    if not name:
        ready = sorted((s for s in models.models.values() if s.ready), key=lambda s: s.name)
        return {"model_stats": [_entry(s) for s in ready]}
    served = models.models.get(name)
    if served is None or not served.ready:
        raise ServeError(NOT_AVAILABLE.format(name), ErrorCode.INVALID_ARG)
    if version not in (None, "", str(served.version)):
        raise ServeError(VERSION_NOT_AVAILABLE.format(name), ErrorCode.INVALID_ARG)
    return {"model_stats": [_entry(served)]}


def _entry(served: Served) -> Dict[str, Any]:
    model = served.model
    counters: Dict[str, Any] = model.statistics.snapshot() if model is not None else {}
    return {"name": served.name, "version": str(served.version), **counters}
