"""pb_utils.batch_requests under tritonserver's dynamic batcher (UV-16): the example model
stacks the rows of the requests Triton put into one execute() and splits its one result back;
every client gets exactly its own rows. (The helper's rules: tests/utils/test_batching.py.)"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from pybackend.server import TritonServer

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "stacked_scale"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("models")
    shutil.copytree(EXAMPLE, repo / "stacked_scale")
    with TritonServer(repo, backend="ours") as s:
        yield s


def test_concurrent_requests_are_computed_together_and_split_back(server):
    weights = np.triu(np.ones((8, 8), np.float32))
    rng = np.random.default_rng(3)
    batches = [rng.standard_normal((1 + i % 4, 8)).astype(np.float32) for i in range(12)]
    client = httpclient.InferenceServerClient(server.http_url, concurrency=len(batches))
    try:
        pending = []
        for batch in batches:
            inp = httpclient.InferInput("INPUT0", list(batch.shape), "FP32")
            inp.set_data_from_numpy(batch)
            pending.append(client.async_infer("stacked_scale", [inp]))
        results = [p.get_result(timeout=60) for p in pending]
        stats = client.get_inference_statistics("stacked_scale")["model_stats"][0]
    finally:
        client.close()
    shared = 0
    for batch, result in zip(batches, results):
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), batch @ weights, rtol=1e-6)
        seen = result.as_numpy("BATCH_ROWS").ravel()
        assert len(seen) == len(batch) and len(set(seen)) == 1 and seen[0] >= len(batch)
        shared += seen[0] > len(batch)
    assert int(stats["inference_count"]) == sum(len(b) for b in batches)
    # The dynamic batcher put several requests into one execute() at least once, and the
    # model computed their rows as one array.
    assert int(stats["execution_count"]) < len(batches)
    assert shared > 0
