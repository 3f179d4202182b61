"""The development server's statistics extension against tritonserver 2.51 with our backend:
add_sub's warmup samples run at load, then the same requests (completed, refused before the
model, failed in execute, batched by the dynamic batcher, streamed from a decoupled model,
and BLS calls from one model to others) go to both; every model's counters read the same
over HTTP and gRPC (durations: the same fields, positive where the counts are), and so do
the errors for an unknown model or version."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any, Dict, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from http_exchange import exchange
from side_by_side import MODES, copied, side_by_side
from tritonclient.utils import InferenceServerException

from integration_support import EXAMPLES_REPOSITORY

MODELS = [
    "add_sub",
    "batched_scale",
    "bls_pipeline",
    "bls_postprocess",
    "bls_preprocess",
    "error_model",
    "string_echo",  # never called: every counter stays zero
    "token_stream",
]
ADD_SUB_WARMUP = """
model_warmup [ { name: "zeros" batch_size: 1 count: 3
  inputs { key: "INPUT0" value: { data_type: TYPE_FP32 dims: [ 4 ] zero_data: true } }
  inputs { key: "INPUT1" value: { data_type: TYPE_FP32 dims: [ 4 ] random_data: true } } } ]
"""
BATCH_REQUESTS = 4  # of 2 rows each: together batched_scale's max_batch_size of 8


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = copied(tmp_path_factory, "statistics", *(EXAMPLES_REPOSITORY / m for m in MODELS))
    # A queue delay far longer than the test, so the batch is the four requests filling
    # max_batch_size on both servers, however slow the machine.
    config = repo / "batched_scale" / "config.pbtxt"
    config.write_text(
        config.read_text().replace(
            "max_queue_delay_microseconds: 50000", "max_queue_delay_microseconds: 30000000"
        )
    )
    # Warmup samples run at load on both servers and count in the statistics.
    add_sub = repo / "add_sub" / "config.pbtxt"
    add_sub.write_text(add_sub.read_text() + ADD_SUB_WARMUP)
    with side_by_side(repo, request.param) as pair:
        for server in pair:
            _run_workload(server)
        yield pair


def _input(module: Any, name: str, array: np.ndarray, datatype: str) -> Any:
    tensor = module.InferInput(name, list(array.shape), datatype)
    tensor.set_data_from_numpy(array)
    return tensor


def _run_workload(server: Any) -> None:
    client = httpclient.InferenceServerClient(server.http_url, concurrency=BATCH_REQUESTS)
    try:
        ones = np.ones(4, np.float32)
        pair = [_input(httpclient, n, ones, "FP32") for n in ("INPUT0", "INPUT1")]
        for _ in range(2):
            client.infer("add_sub", pair)
        wrong = [_input(httpclient, "INPUT0", np.ones(5, np.float32), "FP32"), pair[1]]
        with pytest.raises(InferenceServerException, match="unexpected shape"):
            client.infer("add_sub", wrong)  # refused before the model: counted nowhere
        with pytest.raises(InferenceServerException, match="error_model refuses"):
            client.infer("error_model", [_input(httpclient, "INPUT0", ones, "FP32")])
        rows = _input(httpclient, "INPUT0", np.ones((2, 4), np.float32), "FP32")
        pending = [client.async_infer("batched_scale", [rows]) for _ in range(BATCH_REQUESTS)]
        for result in pending:
            np.testing.assert_array_equal(
                result.get_result().as_numpy("OUTPUT0"), 2 * np.ones((2, 4))
            )
        text = _input(httpclient, "TEXT", np.array([b"stats 42"], dtype=object), "BYTES")
        weights = _input(httpclient, "WEIGHTS", ones, "FP32")
        client.infer("bls_pipeline", [text, weights])  # three BLS calls, add_sub among them
    finally:
        client.close()
    _stream_one(server)


def _stream_one(server: Any) -> None:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    answers: "queue.Queue[Any]" = queue.Queue()
    done = threading.Event()

    def on_answer(result: Any, error: Any) -> None:
        answers.put(error)
        if (
            error is not None
            or result.get_response().parameters["triton_final_response"].bool_param
        ):
            done.set()

    try:
        client.start_stream(callback=on_answer)
        prompt = _input(grpcclient, "PROMPT", np.array([b"one two"], dtype=object), "BYTES")
        client.async_stream_infer("token_stream", [prompt], enable_empty_final_response=True)
        assert done.wait(30), "token_stream's stream did not end"
    finally:
        client.stop_stream()
        client.close()
    assert all(error is None for error in answers.queue)


def _http_stats(server: Any, path: str) -> Tuple[int, Any]:
    return exchange(server.http_url, "GET", path)


def _counts(entry: Dict[str, Any]) -> Dict[str, Any]:
    """Everything but durations and times: what must be equal."""
    return {
        "name": entry["name"],
        "version": entry["version"],
        "inference_count": entry["inference_count"],
        "execution_count": entry["execution_count"],
        "inference_stats": {k: v["count"] for k, v in entry["inference_stats"].items()},
        "batch_stats": [
            {k: (v if k == "batch_size" else v["count"]) for k, v in b.items()}
            for b in entry["batch_stats"]
        ],
        "response_stats": entry["response_stats"],
        "memory_usage": entry["memory_usage"],
    }


def _shape(value: Any) -> Any:
    """The keys at every level (lists by their items' keys)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value]
    return type(value).__name__


@pytest.mark.parametrize("model", MODELS)
def test_counters_read_alike(model: str, servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    status_real, want = _http_stats(real, f"/v2/models/{model}/stats")
    status_dev, got = _http_stats(dev, f"/v2/models/{model}/versions/1/stats")
    assert (status_dev, status_real) == (200, 200)
    (want_entry,) = want["model_stats"]
    (got_entry,) = got["model_stats"]
    assert _shape(got_entry) == _shape(want_entry)
    assert _counts(got_entry) == _counts(want_entry)
    for name, duration in got_entry["inference_stats"].items():
        if name in ("success", "fail", "queue", "compute_infer"):
            assert (duration["ns"] > 0) == (duration["count"] > 0), (name, got_entry)
    assert (got_entry["last_inference"] > 0) == (want_entry["last_inference"] > 0)


def test_every_ready_model_listed(servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    listed = []
    for server in (real, dev):
        status, body = _http_stats(server, "/v2/models/stats")
        assert status == 200
        listed.append(sorted(entry["name"] for entry in body["model_stats"]))
    assert listed[0] == listed[1] == sorted(MODELS)


def test_grpc_answers_alike(servers: Tuple[Any, Any]) -> None:
    stats = []
    for server in servers:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            stats.append(client.get_inference_statistics("add_sub", as_json=True))
        finally:
            client.close()
    want, got = (_grpc_counts(s) for s in stats)
    assert got == want
    # three warmup requests, two direct requests and one BLS call
    assert want["inference_count"] == "6"


def _grpc_counts(stats: Dict[str, Any]) -> Dict[str, Any]:
    (entry,) = stats["model_stats"]
    return {
        "inference_count": entry.get("inference_count"),
        "execution_count": entry.get("execution_count"),
        "inference_stats": {k: v.get("count") for k, v in entry["inference_stats"].items()},
        "batch_stats": [
            {k: (v if k == "batch_size" else v.get("count")) for k, v in b.items()}
            for b in entry.get("batch_stats", [])
        ],
    }


@pytest.mark.parametrize(
    "path", ["/v2/models/no_such_model/stats", "/v2/models/add_sub/versions/7/stats"]
)
def test_unknown_model_or_version_refused_alike(path: str, servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    assert _http_stats(dev, path) == _http_stats(real, path)
    assert _http_stats(real, path)[0] == 400


@pytest.mark.parametrize("name, version", [("no_such_model", ""), ("add_sub", "7")])
def test_grpc_unknown_model_or_version_refused_alike(
    name: str, version: str, servers: Tuple[Any, Any]
) -> None:
    errors = []
    for server in servers:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            with pytest.raises(InferenceServerException) as caught:
                client.get_inference_statistics(name, version)
            errors.append((caught.value.status(), caught.value.message()))
        finally:
            client.close()
    assert errors[0] == errors[1]
    assert errors[0][0] == "StatusCode.INVALID_ARGUMENT"
