"""The examples' BLS pipeline (bls_pipeline calls bls_preprocess, add_sub and
bls_postprocess) as backend-level tests drive it: requests whose scores say every BLS call
of the chain answered right."""

from __future__ import annotations

from typing import Any

import numpy as np

#: What a server serving examples/model_repository loads for bls_pipeline.
BLS_PIPELINE_MODELS = ["add_sub", "bls_preprocess", "bls_postprocess", "bls_pipeline"]


def check_bls_pipeline(server: Any, requests: int) -> None:
    """Send ``requests`` requests to bls_pipeline over HTTP and check each one's SCORES."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url)
    try:
        for i in range(requests):
            text = httpclient.InferInput("TEXT", [1], "BYTES")
            text.set_data_from_numpy(np.array([f"ab {i}".encode()], np.object_))
            weights = httpclient.InferInput("WEIGHTS", [4], "FP32")
            weights.set_data_from_numpy(np.array([0, 0, 0, i], np.float32))
            result = client.infer("bls_pipeline", [text, weights])
            # 2 letters, the digits of i, 1 space, nothing else (+ the weight i)
            expected = np.array([2, len(str(i)), 1, i], np.float32)
            np.testing.assert_array_equal(result.as_numpy("SCORES"), expected)
    finally:
        client.close()  # an open keep-alive connection holds the server's exit up
