"""Shared by the BLS conformance modules: the models to load and one call shape."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from conformance_support.clients import bytes_input, infer, text_output

CALLEES = ["bls_identity", "bls_stream", "bls_error", "bls_params", "bls_ensemble"]
CALLERS = ["bls_caller", "bls_async_caller"]
NOT_READY = (
    "Model no_such_model - Error when running inference: Failed for execute the inference "
    "request. Model 'no_such_model' is not ready."
)


def run(server: Any, mode: str, values: Any = (3.0, 1.0), model: str = "bls_caller") -> Any:
    """Run scenario ``mode`` of a caller model; returns its JSON report."""
    inputs = {"MODE": bytes_input(mode), "INPUT0": np.array(values, np.float32)}
    return json.loads(
        text_output(infer(server, "http", model, inputs, client_timeout=60), "RESULT")
    )
