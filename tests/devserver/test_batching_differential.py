"""The development server's dynamic batcher against tritonserver 2.51's: the same requests
make the same batches (read from both statistics endpoints) for each rule of
pybackend/devserver/batcher.py: a batch reaching a preferred batch size goes at once (the
largest such size when more requests wait; the rest make the next batch), with or without a
queue delay; one the next request cannot join goes at once; once the oldest request has
waited out the delay, all that waits goes."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import tritonclient.http as httpclient
from side_by_side import MODES, side_by_side

# A request whose X starts negative holds the instance for a second, so that the requests
# sent after it queue up and meet the batcher together once it is free.
SCALE = """
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        if pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()[0, 0] < 0:
            time.sleep(1.0)
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor(
                "Y", 2 * pb_utils.get_input_tensor_by_name(r, "X").as_numpy())])
            for r in requests
        ]
"""
CONFIG = """
backend: "python"
max_batch_size: 8
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
dynamic_batching {{ {batching} }}
"""
# model: (dynamic_batching body, rows of each request, a holding request first, batches)
CASES: Dict[str, Tuple[str, List[int], bool, Dict[int, int]]] = {
    # A queue delay far past the test: only the preferred size makes a batch go early.
    "preferred_long_delay": (
        "preferred_batch_size: [ 2 ] max_queue_delay_microseconds: 20000000",
        [1, 1, 1, 1],
        False,
        {2: 2},
    ),
    # No delay: of 7 queued requests the largest preferred size goes first (4, then 2, 1).
    "preferred_no_delay": ("preferred_batch_size: [ 2, 4 ]", [1] * 7, True, {1: 2, 2: 1, 4: 1}),
    # The holder and the next request make a preferred 2, which goes without waiting for 5;
    # the 6 queued behind have waited out the delay by the time the instance is free: all go.
    "preferred_waited_out": (
        "preferred_batch_size: [ 2, 5 ] max_queue_delay_microseconds: 500000",
        [1] * 7,
        True,
        {2: 1, 6: 1},
    ),
    # No preferred size: the holder waits for more until a request of 3 rows cannot join the
    # 7 it has (max 8); that one goes after the holder's second, once its delay is out.
    "cannot_grow": ("max_queue_delay_microseconds: 500000", [3, 3, 3], True, {7: 1, 3: 1}),
}


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = tmp_path_factory.mktemp("batching")
    for name, (batching, *_) in CASES.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(SCALE)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(batching=batching))
    with side_by_side(repo, request.param) as pair:
        yield pair


def _batches(server: Any, model: str, sizes: List[int], hold: bool) -> Dict[int, int]:
    """Send the requests 10 ms apart (0.2 s after a holding one of 1 row); the batches they
    made: {batch size: executions}."""
    client = httpclient.InferenceServerClient(server.http_url, concurrency=len(sizes) + 1)
    try:
        pending, expected = [], []

        def send(rows: int, value: float) -> None:
            x = httpclient.InferInput("X", [rows, 1], "FP32")
            data = np.full((rows, 1), value, np.float32)
            x.set_data_from_numpy(data)
            pending.append(client.async_infer(model, [x]))
            expected.append((2 * data).tolist())

        if hold:
            send(1, -1.0)
            time.sleep(0.2)
        for i, rows in enumerate(sizes):
            send(rows, float(i))
            time.sleep(0.01)
        assert [p.get_result().as_numpy("Y").tolist() for p in pending] == expected
        stats = client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()
    return {b["batch_size"]: b["compute_infer"]["count"] for b in stats["batch_stats"]}


@pytest.mark.parametrize("model", list(CASES))
def test_the_same_requests_make_the_same_batches(servers: Tuple[Any, Any], model: str) -> None:
    real, dev = servers
    _, sizes, hold, batches = CASES[model]
    assert _batches(dev, model, sizes, hold) == _batches(real, model, sizes, hold) == batches
