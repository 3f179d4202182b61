"""Batching options of config.pbtxt in front of python models: allow_ragged_batch
(models/ragged), input and output reshape (models/reshaped, reshaped_batch), priority levels
and a queue policy that rejects a request whose timeout expires in the queue (models/prio)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, infer_error, text_output

MODELS = ["ragged", "reshaped", "reshaped_batch", "prio"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS) as srv:
        yield srv


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ragged_requests(server, protocol):
    lengths = [1, 2, 3, 4, 5]

    def send(n):
        data = np.arange(n, dtype=np.float32).reshape(1, n)
        result = infer(server, protocol, "ragged", {"IN": data})
        return result.outputs["OUT"].tolist(), json.loads(text_output(result, "INFO"))

    with ThreadPoolExecutor(len(lengths)) as pool:
        answers = list(pool.map(send, lengths))
    for n, (out, info) in zip(lengths, answers, strict=True):
        assert out == [[2.0 * i for i in range(n)]]
        assert info["shape"] == [1, n]  # each request keeps its own shape
        assert all(shape in ([1, m] for m in lengths) for shape in info["batch"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reshaped_input_and_output(server, protocol):
    result = infer(server, protocol, "reshaped", {"IN": np.array([1, 2, 3, 4], np.int32)})
    assert json.loads(text_output(result, "INFO")) == {"shape": [2, 2]}
    assert result.outputs["OUT"].shape == (4,)
    assert result.outputs["OUT"].tolist() == [2, 3, 4, 5]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_reshaped_with_a_batch_dimension(server, protocol):
    data = np.array([[1], [2], [3]], np.int32)
    result = infer(server, protocol, "reshaped_batch", {"IN": data})
    assert json.loads(result.outputs["INFO"].reshape(-1)[0]) == {"shape": [3]}
    assert result.outputs["OUT"].tolist() == [[2], [3], [4]]


def ask(server, protocol, seconds=0.0, **kwargs):
    result = infer(server, protocol, "prio", {"SLEEP": np.array([[seconds]], np.float32)}, **kwargs)
    return json.loads(text_output(result, "INFO"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_queue_policys_default_timeout_is_not_the_requests(server, protocol):
    assert ask(server, protocol, request_id="p0")["timeout"] == 0


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_priority_and_timeout_as_the_model_sees_them(server, protocol):
    info = ask(server, protocol, request_id="p1", priority=1, timeout=5000000)
    assert info == {
        "request_id": "p1",
        "timeout": 5000000,
        "flags": 0,
        "parameters": {},
        "batch": 1,
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_request_timing_out_in_the_queue_is_rejected(server, feature_repository, protocol):
    busy = feature_repository.model_dir("prio") / "busy"
    busy.unlink(missing_ok=True)
    with ThreadPoolExecutor(1) as pool:
        blocker = pool.submit(ask, server, protocol, 1.0, request_id="blocker")
        deadline = time.monotonic() + 30
        while not busy.exists():
            assert time.monotonic() < deadline, "the blocking request never started"
            time.sleep(0.02)
        error = infer_error(
            server,
            protocol,
            "prio",
            {"SLEEP": np.array([[0.0]], np.float32)},
            request_id="late",
            timeout=100000,
        )
        assert blocker.result()["request_id"] == "blocker"
    assert error.message == "Request timeout expired"
    assert error.status == ("503" if protocol == "http" else "StatusCode.UNAVAILABLE")
    # The model never saw it.
    seen = (feature_repository.model_dir("prio") / "seen.txt").read_text().split()
    assert "late" not in seen
    assert "blocker" in seen
