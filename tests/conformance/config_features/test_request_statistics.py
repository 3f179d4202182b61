"""What a python model's answers count as in tritonserver's statistics (models/stats_*):
an answer, an error response (returned or sent), an exception and a sender that only sends
the final flag, in default and decoupled mode: the statistics extension's success and fail
counts, inference and execution counts."""

from __future__ import annotations

import pytest
import tritonclient.http as httpclient

from conformance_support.clients import bytes_input, infer
from conformance_support.control import wait_for
from conformance_support.streaming import stream_once

MODELS = ["stats_plain", "stats_decoupled"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS) as srv:
        yield srv


def counts(server, model) -> dict[str, int]:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()
    found = {k: int(v["count"]) for k, v in stats["inference_stats"].items()}
    found["inference"] = int(stats["inference_count"])
    found["execution"] = int(stats["execution_count"])
    return found


def outcome(server, model, mode) -> str:
    if model == "stats_decoupled":
        events = stream_once(server, model, {"MODE": bytes_input(mode)})
        return ",".join(e.error or ("out" if e.outputs else "final") for e in events)
    try:
        result = infer(server, "http", model, {"MODE": bytes_input(mode)})
    except Exception as exc:  # noqa: BLE001 - the client's error is the outcome
        return str(exc).split("\n")[0]
    return "out" if result.outputs else "empty"


NONE = {"cache_hit": 0, "cache_miss": 0}
# A completed request counts in every stage; a failed one in none.
OK = {
    "success": 1,
    "fail": 0,
    "queue": 1,
    "compute_input": 1,
    "compute_infer": 1,
    "compute_output": 1,
    "inference": 1,
    "execution": 1,
    **NONE,
}
FAILED = {
    "success": 0,
    "fail": 1,
    "queue": 0,
    "compute_input": 0,
    "compute_infer": 0,
    "compute_output": 0,
    "inference": 0,
    "execution": 1,
    **NONE,
}
RAISED = "Failed to process the request(s) for model '{model}_0', message: ValueError: asked"

# (model, mode) -> (what the client gets, the statistics' change)
CASES = {
    ("stats_plain", "ok"): ("out", OK),
    # The model's own error response is an answer: a success for the statistics.
    ("stats_plain", "error"): ("[500] asked for an error", OK),
    ("stats_plain", "sender_error"): ("[500] asked for an error", OK),
    ("stats_plain", "raise"): ("[500] " + RAISED, FAILED),
    ("stats_plain", "none_final"): (
        "[500] Failed to process the request(s) for model 'stats_plain_0', message: "
        "TritonModelException: Unable to send response. Non-decoupled model cannot send "
        "complete final before sending a response.",
        FAILED,
    ),
    ("stats_decoupled", "ok"): ("out", OK),
    ("stats_decoupled", "error"): ("asked for an error", OK),
    ("stats_decoupled", "raise"): (RAISED, FAILED),
    ("stats_decoupled", "none_final"): ("final", OK),
}


@pytest.mark.parametrize("model,mode", list(CASES))
def test_what_an_answer_counts_as(server, model, mode):
    seen_wanted, delta_wanted = CASES[(model, mode)]
    before = counts(server, model)
    seen = outcome(server, model, mode)
    assert seen.split(" to raise")[0] == seen_wanted.format(model=model)
    # Statistics are reported once execute returned, maybe after the client had its answer.
    wait_for(lambda: counts(server, model)["execution"] > before["execution"], 10, "the statistics")
    after = counts(server, model)
    assert {k: after[k] - before[k] for k in after} == delta_wanted
