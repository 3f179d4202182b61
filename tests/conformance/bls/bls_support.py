"""Shared by the BLS conformance modules: the models to load and one call shape."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from conformance_support.clients import bytes_input, infer, text_output

CALLEES = [
    "bls_identity",
    "bls_stream",
    "bls_stream_final",
    "bls_error",
    "bls_params",
    "bls_ensemble",
]
CALLERS = ["bls_caller", "bls_async_caller", "bls_decoupled_caller"]
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


def stream(server: Any, model: str, values: Any, timeout: float = 60.0) -> list:
    """One request to a decoupled model over a gRPC stream; the JSON RESULT of every
    response until the final flag (an error raises)."""
    import queue

    import tritonclient.grpc as grpcclient

    q: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: q.put((result, error)))
        inp = grpcclient.InferInput("INPUT0", [len(values)], "FP32")
        inp.set_data_from_numpy(np.array(values, np.float32))
        client.async_stream_infer(model, [inp], enable_empty_final_response=True)
        got = []
        while True:
            result, error = q.get(timeout=timeout)
            if error is not None:
                raise error
            if result.as_numpy("RESULT") is not None:
                got.append(json.loads(result.as_numpy("RESULT")[0]))
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return got
    finally:
        client.stop_stream()
        client.close()
