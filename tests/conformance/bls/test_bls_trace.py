"""BLS with trace=request.trace(): with tracing on, the BLS request is traced as a child of
the request that made it (spec 3.2, 4.6: TRITONSERVER_InferenceTraceSpawnChildTrace)."""

from __future__ import annotations

import json

import numpy as np

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.launcher import trace_args


def test_bls_request_is_a_child_trace(feature_repository, tmp_path):
    trace_file = tmp_path / "trace.json"
    args = trace_args(trace_file)
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["bls_identity", "bls_caller"], extra_args=args
    )
    with start as server:
        inputs = {"MODE": bytes_input("traced"), "INPUT0": np.ones(2, np.float32)}
        result = json.loads(text_output(infer(server, "http", "bls_caller", inputs), "RESULT"))
        assert result["outputs"] == {"OUTPUT0": [1.0, 1.0]}
    # The server writes its traces when it exits.
    traces = [t for t in json.loads(trace_file.read_text()) if "model_name" in t]
    by_model = {t["model_name"]: t for t in traces}
    assert set(by_model) == {"bls_caller", "bls_identity"}
    assert "parent_id" not in by_model["bls_caller"]
    assert by_model["bls_identity"]["parent_id"] == by_model["bls_caller"]["id"]
