"""response_cache { enable: true } on a python model (models/cached), the server started
with a local cache: a hit never reaches execute and answers the first call's outputs
(BYTES included), error responses are not cached, the statistics count hits and misses, and
a decoupled model with the cache is refused at load."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from conformance_support.clients import PROTOCOLS, client_for, infer, infer_error
from pybackend.server.locate import tritonserver_binary

MODEL = "cached"


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit",
        load_models=[MODEL],
        extra_args=[
            "--cache-config=local,size=1048576",
            # The wheel's server looks for its caches under /opt/tritonserver by default.
            f"--cache-directory={tritonserver_binary().parent.parent / 'caches'}",
        ],
    )
    with start as srv:
        yield srv


def seen(feature_repository) -> list[str]:
    path = feature_repository.model_dir(MODEL) / "seen.txt"
    return path.read_text().splitlines() if path.exists() else []


def cache_counts(server) -> tuple[int, int, int, int]:
    """Cache hits, cache misses, executions, inferences of the model's statistics."""
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics(MODEL)["model_stats"][0]
    finally:
        client.close()
    infer_stats = stats["inference_stats"]
    return (
        int(infer_stats["cache_hit"]["count"]),
        int(infer_stats["cache_miss"]["count"]),
        int(stats["execution_count"]),
        int(stats["inference_count"]),
    )


def ask(server, protocol, *values):
    return infer(server, protocol, MODEL, {"IN": np.array(values, np.int32)})


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_cache_hit_does_not_reach_execute(server, feature_repository, protocol):
    values = (7, 8) if protocol == "http" else (9, 10, 11)
    before, hits_before = seen(feature_repository), cache_counts(server)
    first = ask(server, protocol, *values)
    second = ask(server, protocol, *values)
    assert seen(feature_repository)[len(before) :] == [" ".join(map(str, values))]
    for result in (first, second):
        assert result.outputs["OUT"].tolist() == [3 * v for v in values]
        assert result.outputs["TEXT"].tolist() == [str(v).encode() for v in values]
        assert result.datatypes == {"OUT": "INT32", "TEXT": "BYTES", "CALL": "INT64"}
    assert second.outputs["CALL"].tolist() == first.outputs["CALL"].tolist()
    after = cache_counts(server)
    # One miss (then one execution, one inference), one hit; a hit is not an execution.
    assert [a - b for a, b in zip(after, hits_before, strict=True)] == [1, 1, 1, 1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_other_inputs_miss(server, feature_repository, protocol):
    base = 100 if protocol == "http" else 200
    before = seen(feature_repository)
    calls = [int(ask(server, protocol, base + i).outputs["CALL"][0]) for i in range(3)]
    assert len(set(calls)) == 3
    assert seen(feature_repository)[len(before) :] == [str(base + i) for i in range(3)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_an_error_response_is_cached_as_an_empty_answer(server, feature_repository, protocol):
    """tritonserver 2.51 puts the model's error response in the cache as a response without
    outputs: the same request again succeeds, empty, and does not reach the model."""
    value = -1 if protocol == "http" else -2
    before, counts = seen(feature_repository), cache_counts(server)
    error = infer_error(server, protocol, MODEL, {"IN": np.array([value], np.int32)})
    assert error.message == "negative input"
    again = ask(server, protocol, value)
    assert again.outputs == {}
    assert seen(feature_repository)[len(before) :] == [str(value)]
    after = cache_counts(server)
    # The model's error response is a success for the statistics (test_request_statistics).
    assert [a - b for a, b in zip(after, counts, strict=True)] == [1, 1, 1, 1]


def test_a_decoupled_model_with_the_cache_is_refused(server):
    client = client_for(server, "http")
    try:
        with pytest.raises(InferenceServerException) as failure:
            client.load_model("cached_decoupled")
    finally:
        client.close()
    assert failure.value.message() == (
        "failed to load 'cached_decoupled', failed to poll from model repository"
    )
    assert (
        "Response Cache does not currently support model cached_decoupled with 'decoupled' "
        "transaction policy. Please disable the response cache." in server.log_text()
    )
