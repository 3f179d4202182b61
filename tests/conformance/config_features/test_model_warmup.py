"""model_warmup samples of a python model (models/warm*): what execute sees for zero_data,
random_data and input_data_file inputs (INT32, BYTES, FP32), batch_size and count, and a
warmup on which the model raises or answers with an error response."""

from __future__ import annotations

import json

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from conformance_support.clients import client_for, infer

MODEL = "warm"


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL]) as srv:
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


@pytest.mark.parametrize(
    "model,mode,why",
    [
        (
            "warm_raises",
            "raise",
            "Failed to process the request(s) for model 'warm_raises_0_0', message: ValueError: "
            "warmup asked to raise\n\nAt:\n  {model_py}({line}): execute\n",
        ),
        ("warm_error", "error", "warmup asked for an error"),
    ],
)
def test_a_failing_warmup_fails_the_load(server, feature_repository, model, mode, why):
    model_py = feature_repository.model_dir(model) / "1" / "model.py"
    lines = model_py.read_text().splitlines()
    line = next(n for n, text in enumerate(lines, 1) if "raise ValueError" in text)
    client = client_for(server, "http")
    try:
        with pytest.raises(InferenceServerException) as failure:
            client.load_model(model)
    finally:
        client.close()
    assert failure.value.message() == (
        f"load failed for model '{model}': version 1 is at UNAVAILABLE state: Invalid argument: "
        f"failed to run warmup sample 'failing': {why.format(model_py=model_py, line=line)}; ;\n"
    )
    assert [r["inputs"]["MODE"] for r in records(feature_repository, model)] == [
        ["|O", [1, 1], [mode]]
    ]
