"""The development server's dynamic batcher against tritonserver 2.51's: a batch that reaches
the largest preferred batch size goes at once instead of waiting out the queue delay, so
the same concurrent requests make the same batches (read from both statistics endpoints)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Dict, Tuple

import numpy as np
import pytest
import tritonclient.http as httpclient
from side_by_side import MODES, side_by_side

SCALE = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(
                "Y", 2 * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
"""
# A queue delay far past the test: only the preferred size can make a batch go early.
CONFIG = """
backend: "python"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
dynamic_batching { preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 20000000 }
"""
REQUESTS = 4


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = tmp_path_factory.mktemp("batching")
    (repo / "preferred" / "1").mkdir(parents=True)
    (repo / "preferred" / "1" / "model.py").write_text(SCALE)
    (repo / "preferred" / "config.pbtxt").write_text(CONFIG)
    with side_by_side(repo, request.param) as pair:
        yield pair


def _batches(server: Any) -> Dict[int, int]:
    """Send the requests at once; the batches they made: {batch size: executions}."""
    client = httpclient.InferenceServerClient(server.http_url, concurrency=REQUESTS)
    try:
        pending = []
        for i in range(REQUESTS):
            x = httpclient.InferInput("X", [1, 1], "FP32")
            x.set_data_from_numpy(np.array([[i]], np.float32))
            pending.append(client.async_infer("preferred", [x]))
        answers = [p.get_result().as_numpy("Y").tolist() for p in pending]
        assert answers == [[[2.0 * i]] for i in range(REQUESTS)]
        stats = client.get_inference_statistics("preferred")["model_stats"][0]
    finally:
        client.close()
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


def test_a_preferred_batch_goes_without_waiting(servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    assert _batches(dev) == _batches(real) == {2: 2}
