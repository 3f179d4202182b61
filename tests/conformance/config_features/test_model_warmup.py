"""model_warmup samples of a python model (models/warm*): what execute sees for zero_data,
random_data and input_data_file inputs (INT32, BYTES, FP32), batch_size and count, and a
decoupled model's warmup answered from a thread. Failing warmups: test_warmup_failures.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import infer

MODEL = "warm"


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL, "warm_decoupled"]) as srv:
        yield srv


def records(feature_repository, model):
    path = feature_repository.model_dir(model) / "seen.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def warmup_record(batch, ints, strings, floats):
    return {
        "batch": batch,
        "request_id": "",
        "correlation_id": 0,
        "flags": 0,
        "inputs": {
            "IN_INT": ["<i4", [1, 3], ints],
            "IN_STR": ["|O", [1, 2], strings],
            "IN_F": ["<f4", [1, 2], floats],
        },
    }


def test_what_execute_sees_during_warmup(server, feature_repository):
    seen = records(feature_repository, MODEL)
    # random_data: the values are whatever the buffer held (BYTES: empty elements).
    for record in seen[2:4]:
        for name in ("IN_INT", "IN_F"):
            record["inputs"][name][2] = "random"
    zeros = warmup_record(2, [0, 0, 0], ["", ""], [0.0, 0.0])
    random = warmup_record(1, "random", ["", ""], "random")
    # batch_size 2: two requests of batch 1 in one execute; count 2: the sample twice.
    assert seen == [
        zeros,
        zeros,
        random,
        random,
        warmup_record(1, [1, -2, 3], ["ab", ""], [0.5, -1.5]),
    ]


def test_the_model_serves_after_its_warmup(server, feature_repository):
    inputs = {
        "IN_INT": np.zeros((1, 3), np.int32),
        "IN_STR": np.array([[b"x", b"y"]], np.object_),
        "IN_F": np.zeros((1, 2), np.float32),
    }
    result = infer(server, "http", MODEL, inputs, request_id="after")
    assert result.outputs["OUT"].tolist() == [[3]]
    assert records(feature_repository, MODEL)[-1]["request_id"] == "after"


def test_a_decoupled_warmup_answered_from_a_thread(server, feature_repository):
    """The load waits for each sample's final flag, sent after execute returned."""
    seen = (feature_repository.model_dir("warm_decoupled") / "seen.txt").read_text()
    one = ["execute [0, 0] ''", "returned", "sent", "sent", "final"]
    assert seen.splitlines() == one + one
