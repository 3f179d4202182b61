"""The sequence batcher in front of python models (models/seq_*): the direct strategy with
every control input and uint64 correlation ids, the oldest strategy with string ids through a
TYPE_STRING CORRID control, what request.correlation_id() and request.flags() return, the
null requests the direct strategy fills empty slots with, interleaved sequences over HTTP and
on a gRPC stream, a sequence released after max_sequence_idle_microseconds, a decoupled model
behind the batcher and implicit state (sequence_batching state)."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, infer_error, text_output
from conformance_support.streaming import Stream

MODELS = ["seq_direct", "seq_oldest", "seq_idle", "seq_string_corrid", "seq_decoupled", "seq_state"]
START, END = 1, 2


@pytest.fixture(scope="module")
def server(feature_repository):
    # short_exit: tritonserver 2.51 keeps counting the string-corrid request it refuses as
    # in flight (test_a_string_corrid_control_is_refused_by_the_server), so its shutdown
    # waits out the whole exit timeout (15 s by default) with either backend.
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


class Recorder:
    """The requests a model recorded in its seen.jsonl since the last call."""

    def __init__(self, feature_repository, model: str) -> None:
        self.path = feature_repository.model_dir(model) / "seen.jsonl"
        self.done = len(self._all())

    def _all(self) -> list[dict]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines()]

    def new(self) -> list[dict]:
        records = self._all()
        fresh, self.done = records[self.done :], len(records)
        return fresh


def step(server, protocol, model, sequence_id, value, flags=0, batched=True):
    data = np.array([[value]] if batched else [value], np.int32)
    result = infer(
        server,
        protocol,
        model,
        {"IN": data},
        sequence_id=sequence_id,
        sequence_start=bool(flags & START),
        sequence_end=bool(flags & END),
    )
    return int(result.outputs["OUT"].reshape(-1)[0]), json.loads(text_output(result, "INFO"))


def direct_record(corrid, flags, value, batch=1, ready=True):
    return {
        "batch": batch,
        "correlation_id": corrid,
        "type": "int",
        "flags": flags,
        "in": value,
        "inputs": ["CORRID", "END", "IN", "READY", "START"],
        "START": ["<i4", [1, 1], [int(bool(flags & START))]],
        "END": ["<f4", [1, 1], [float(bool(flags & END))]],
        "READY": ["|b1", [1, 1], [ready]],
        "CORRID": ["<u8", [1, 1], [corrid]],
    }


@pytest.mark.parametrize(
    "protocol,corrid",
    [("http", 1001), ("grpc", 1002), ("http", 2**64 - 1), ("grpc", 2**63 - 1)],
    ids=["http", "grpc", "http-max", "grpc-max"],
)
def test_direct_strategy_control_inputs_and_uint64_ids(
    server, feature_repository, protocol, corrid
):
    recorder = Recorder(feature_repository, "seq_direct")
    sums = [
        step(server, protocol, "seq_direct", corrid, 1, START)[0],
        step(server, protocol, "seq_direct", corrid, 2)[0],
        step(server, protocol, "seq_direct", corrid, 3, END)[0],
    ]
    assert sums == [1, 3, 6]
    assert recorder.new() == [
        direct_record(corrid, START, 1),
        direct_record(corrid, 0, 2),
        direct_record(corrid, END, 3),
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_direct_strategy_interleaved_sequences(server, feature_repository, protocol):
    recorder = Recorder(feature_repository, "seq_direct")
    plan = [(11, 1, START), (12, 10, START), (11, 2, 0), (12, 20, END), (11, 3, END)]
    sums = [step(server, protocol, "seq_direct", *request)[0] for request in plan]
    assert sums == [1, 10, 3, 30, 6]
    records = recorder.new()
    for record in records:
        if record["correlation_id"] == 0:
            record.pop("in")  # a null request's data is whatever its buffer held
    # Sequence 11 holds slot 0, 12 slot 1: a batch for slot 1 alone gets a null request
    # (correlation id 0, READY false, no flags) in slot 0; one for slot 0 alone is one request.
    null = direct_record(0, 0, 0, batch=2, ready=False)
    null.pop("in")
    assert records == [
        direct_record(11, START, 1),
        null,
        direct_record(12, START, 10, batch=2),
        direct_record(11, 0, 2),
        null,
        direct_record(12, END, 20, batch=2),
        direct_record(11, END, 3),
    ]


def oldest_record(corrid, flags, value):
    return {
        "batch": 1,
        "correlation_id": corrid,
        "type": "str",
        "flags": flags,
        "in": value,
        "inputs": ["END", "IN", "READY", "START"],
        "START": ["<i4", [1, 1], [int(bool(flags & START))]],
        "END": ["<i4", [1, 1], [int(bool(flags & END))]],
        "READY": ["<i4", [1, 1], [1]],
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_oldest_strategy_string_ids(server, feature_repository, protocol):
    recorder = Recorder(feature_repository, "seq_oldest")
    plan = [("seq-a", 1, START), ("seq-b", 10, START), ("seq-a", 2, END), ("seq-b", 20, END)]
    sums = [step(server, protocol, "seq_oldest", *request)[0] for request in plan]
    assert sums == [1, 10, 3, 30]
    assert recorder.new() == [oldest_record(seq, flags, value) for seq, value, flags in plan]


def test_interleaved_sequences_on_one_grpc_stream(server):
    """Four sequences sent on one stream without waiting: each answer has its own sum."""
    plan = []
    for i in range(3):
        for seq in ("s1", "s2", "s3", "s4"):
            flags = (START if i == 0 else 0) | (END if i == 2 else 0)
            plan.append((f"{seq}-{i}", seq, i + 1, flags))
    with Stream(server) as stream:
        for request_id, seq, value, flags in plan:
            stream.send(
                "seq_oldest",
                {"IN": np.array([[value]], np.int32)},
                request_id=request_id,
                sequence_id=seq,
                sequence_start=bool(flags & START),
                sequence_end=bool(flags & END),
            )
        events = stream.until_final(len(plan))
    sums = {e.request_id: int(e.outputs["OUT"].reshape(-1)[0]) for e in events if e.outputs}
    assert all(e.error is None for e in events)
    assert sums == {
        f"{seq}-{i}": [1, 3, 6][i] for seq in ("s1", "s2", "s3", "s4") for i in range(3)
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_sequence_idle_too_long_is_released(server, feature_repository, protocol):
    recorder = Recorder(feature_repository, "seq_idle")
    corrid = 7 if protocol == "http" else 8
    assert step(server, protocol, "seq_idle", corrid, 5, START, batched=False)[0] == 5
    time.sleep(1.5)
    error = infer_error(
        server, protocol, "seq_idle", {"IN": np.array([6], np.int32)}, sequence_id=corrid
    )
    assert error.message == (
        f"inference request for sequence {corrid} to model 'seq_idle' must specify the START "
        "flag on the first request of the sequence"
    )
    records = recorder.new()
    assert [(r["correlation_id"], r["flags"], r["in"]) for r in records] == [(corrid, START, 5)]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_string_corrid_control_is_refused_by_the_server(server, feature_repository, protocol):
    """tritonserver 2.51 fails to validate the TYPE_STRING control tensor it made itself; the
    text depends on memory it reads, so only the input it names is compared."""
    recorder = Recorder(feature_repository, "seq_string_corrid")
    error = infer_error(
        server,
        protocol,
        "seq_string_corrid",
        {"IN": np.array([[1]], np.int32)},
        sequence_id="str-1",
        sequence_start=True,
    )
    assert "for inference input 'CORRID'" in error.message
    assert error.status == ("400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT")
    assert recorder.new() == []


def test_a_decoupled_model_behind_the_sequence_batcher(server):
    plan = [("a", 2, START), ("b", 1, START), ("a", 1, END), ("b", 2, END)]
    with Stream(server) as stream:
        for i, (seq, count, flags) in enumerate(plan):
            stream.send(
                "seq_decoupled",
                {"IN": np.array([count], np.int32)},
                request_id=f"r{i}",
                sequence_id=seq,
                sequence_start=bool(flags & START),
                sequence_end=bool(flags & END),
            )
        events = stream.until_final(len(plan))
    answers = sorted((e.request_id, e.value()) for e in events if e.outputs)
    # "<correlation id>:<flags>:<START>:<running count of the sequence>"
    assert answers == [
        ("r0", "a:1:1:1"),
        ("r0", "a:1:1:2"),
        ("r1", "b:1:1:1"),
        ("r2", "a:2:0:3"),
        ("r3", "b:2:0:2"),
        ("r3", "b:2:0:3"),
    ]
    assert sorted(e.request_id for e in events if e.final) == ["r0", "r1", "r2", "r3"]


def test_implicit_state_does_not_carry_over(server, feature_repository):
    """A python model gets a STATE_IN on every request; neither backend stores the model's
    STATE_OUT for the sequence's next request. What STATE_IN holds is whatever tritonserver's
    state buffer held (zeros in most runs, other bytes in some, on both backends): only that
    it is the same on each request of the sequence, i.e. nothing was carried, is defined."""
    answers = []
    for value, flags in ((1, START), (2, 0), (3, END)):
        result = infer(
            server,
            "http",
            "seq_state",
            {"IN": np.array([value], np.int32)},
            sequence_id=5,
            sequence_start=bool(flags & START),
            sequence_end=bool(flags & END),
        )
        answers.append(int(result.outputs["OUT"].reshape(-1)[0]) - value)
    # OUT = IN + STATE_IN: a carried STATE_OUT would add the earlier totals.
    assert answers[0] == answers[1] == answers[2], answers
    seen = (feature_repository.model_dir("seq_state") / "seen.txt").read_text()
    assert [line.split(" [")[0] for line in seen.splitlines()] == ["['IN', 'STATE_IN']"] * 3
