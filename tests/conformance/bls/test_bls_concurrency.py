"""UV-32: a thin `async def execute` BLS wrapper around a 50 ms model overlaps requests
inside one instance; the same wrapper written with a plain execute serves one at a time."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from conformance_support.clients import infer

CLIENTS = 8
pytestmark = pytest.mark.deviation(
    "in-instance concurrency comes from pybackend's PYBACKEND_ASYNC_EXECUTE_CONCURRENCY"
)


@pytest.fixture(scope="module")
def server(feature_repository):
    models = ["bls_slow", "bls_async_wrapper", "bls_sync_wrapper"]
    with feature_repository.start(model_control_mode="explicit", load_models=models) as srv:
        yield srv


def wall_time(server, model: str, clients: int = CLIENTS) -> float:
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            x = np.array([i], np.float32)
            assert infer(server, "grpc", model, {"INPUT0": x}).outputs["OUTPUT0"].tolist() == [i]
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(clients)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    return time.monotonic() - start


def test_async_wrapper_overlaps_requests(server):
    single = min(wall_time(server, "bls_async_wrapper", clients=1) for _ in range(3))
    together = min(wall_time(server, "bls_async_wrapper") for _ in range(3))
    # One at a time, 8 requests need 8x the time of one; overlapped, about 1x.
    assert together < 4 * single, (together, single)


def test_sync_wrapper_serves_one_at_a_time(server):
    # The contrast that makes the test above meaningful: 8 x 50 ms at the least.
    assert wall_time(server, "bls_sync_wrapper") >= CLIENTS * 0.05
