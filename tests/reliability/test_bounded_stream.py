"""A decoupled model streams responses that each fit under shm-max-byte-size but together
exceed it: the stub's arena waits (bounded) for the blocks the backend has copied to come
back instead of failing mid-stream. Found by probing: 10 responses of 16 MiB under a 64 MiB
bound failed at the 5th (`... does not fit under the shared-memory limit ... 67108864 in
use`), though the backend returns each block within its 50 ms tick. A single response larger
than the bound still fails at once."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from reliability_support import start

MiB = 1 << 20
CAP = 16 * MiB


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(["stream_big"], backend_config=[("shm-max-byte-size", str(CAP))]) as s:
        yield s


def _stream(server: Any, count: int, size: int) -> list[Any]:
    import tritonclient.grpc as grpcclient

    q: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: q.put(error or result))
        n = grpcclient.InferInput("N", [2], "INT64")
        n.set_data_from_numpy(np.array([count, size], dtype=np.int64))
        client.async_stream_infer("stream_big", [n])
        got: list[Any] = []
        while len(got) < count:
            got.append(q.get(timeout=60))
            if isinstance(got[-1], Exception):
                break
        return got
    finally:
        client.stop_stream()
        client.close()


def test_a_stream_larger_than_the_bound_is_served(server: Any) -> None:
    got = _stream(server, 8, 4 * MiB)  # 32 MiB in all, under a 16 MiB bound
    assert not [g for g in got if isinstance(g, Exception)], got
    for i, result in enumerate(got):
        out = result.as_numpy("OUT")
        assert out.nbytes == 4 * MiB and out[0] == out[-1] == i


def test_a_response_larger_than_the_bound_fails_at_once(server: Any) -> None:
    (error,) = _stream(server, 1, 2 * CAP)
    assert "does not fit under the shared-memory limit of 16777216 bytes" in str(error)
    assert "after waiting" not in str(error)  # it can never fit: no wait
    assert not [g for g in _stream(server, 2, MiB) if isinstance(g, Exception)]
