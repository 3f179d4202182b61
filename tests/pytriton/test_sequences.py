"""Stateful models through Triton's sequence batcher (``ModelConfig(sequence_batcher=...)``):
each request carries its sequence id and START/END flags as attributes, a callable keyed by
sequence id keeps per-sequence state, and the control inputs arrive as tensors. Interleaved
sequences over gRPC, both strategies, against the real tritonserver."""

from __future__ import annotations

import time
from typing import Any, Dict, List, Union

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integration_support.pytriton_helpers import urls
from pybackend.pytriton.exceptions import PyTritonBadParameterError
from pybackend.pytriton.model_config import (
    DynamicBatcher,
    ModelConfig,
    SequenceBatcher,
    SequenceControl,
    SequenceControlInput,
    SequenceStrategy,
    Tensor,
)
from pybackend.pytriton.proxy.types import Request
from pybackend.pytriton.triton import Triton

IO = {
    "inputs": [Tensor(name="x", dtype=np.int64, shape=(1,))],
    "outputs": [Tensor(name="total", dtype=np.int64, shape=(1,))],
}
CONTROLS = [
    SequenceControlInput("START", SequenceControl.START),
    SequenceControlInput("END", SequenceControl.END, np.float32),
    SequenceControlInput("READY", SequenceControl.READY, np.bool_),
    SequenceControlInput("CORRID", SequenceControl.CORRID, np.uint64),
]


class Accumulator:
    """One running sum per sequence id; a sequence's state goes at its END. The direct
    strategy fills idle batch slots with requests of sequence id 0 (READY false, inputs
    undefined): their answers are dropped by Triton."""

    def __init__(self) -> None:
        self.state: Dict[Union[int, str], int] = {}
        self.seen: List[Dict[str, Any]] = []
        self.fillers = 0

    def __call__(self, requests: List[Request]) -> List[Dict[str, np.ndarray]]:
        out = []
        for r in requests:
            if not r.sequence_id:  # an idle slot's filler
                self.fillers += 1
                out.append({"total": np.zeros((1, 1), np.int64)})
                continue
            self.seen.append(
                {
                    "id": r.sequence_id,
                    "start": r.sequence_start,
                    "end": r.sequence_end,
                    "controls": {k: r[k].reshape(-1)[0].item() for k in r if k != "x"},
                }
            )
            if r.sequence_start:
                self.state[r.sequence_id] = 0
            self.state[r.sequence_id] += int(r["x"].reshape(-1)[0])
            out.append({"total": np.array([[self.state[r.sequence_id]]], np.int64)})
            if r.sequence_end:
                del self.state[r.sequence_id]
        return out


def _send(client: Any, model: str, seq: Union[int, str], x: int, start: bool, end: bool) -> int:
    shape = [1] if model.endswith("Unbatched") else [1, 1]
    lib = httpclient if isinstance(client, httpclient.InferenceServerClient) else grpcclient
    inp = lib.InferInput("x", shape, "INT64")
    inp.set_data_from_numpy(np.full(shape, x, np.int64))
    timeout = {"timeout": 60} if lib is httpclient else {"client_timeout": 60}
    result = client.infer(
        model, [inp], sequence_id=seq, sequence_start=start, sequence_end=end, **timeout
    )
    return int(result.as_numpy("total").reshape(-1)[0])


def _interleaved(client: Any, model: str, a: Union[int, str], b: Union[int, str]) -> List[int]:
    """Sequence a: 1, 2, 3; sequence b: 10, 20, 30; sent alternately."""
    return [
        _send(client, model, a, 1, True, False),
        _send(client, model, b, 10, True, False),
        _send(client, model, a, 2, False, False),
        _send(client, model, b, 20, False, False),
        _send(client, model, a, 3, False, True),
        _send(client, model, b, 30, False, True),
    ]


@pytest.mark.parametrize("strategy", list(SequenceStrategy), ids=lambda s: s.value)
def test_interleaved_sequences_keep_their_state(triton: Triton, strategy: SequenceStrategy) -> None:
    model = Accumulator()
    batcher = SequenceBatcher(
        strategy=strategy, max_sequence_idle_microseconds=30_000_000, control_inputs=CONTROLS
    )
    triton.bind("Acc", model, **IO, config=ModelConfig(max_batch_size=4, sequence_batcher=batcher))
    triton.run()
    with grpcclient.InferenceServerClient(urls(triton)[1].removeprefix("grpc://")) as client:
        totals = _interleaved(client, "Acc", 101, 202)
        config = client.get_model_config("Acc", as_json=True)["config"]
    assert totals == [1, 10, 3, 30, 6, 60]
    assert model.state == {}  # both sequences ended
    assert [(s["id"], s["start"], s["end"]) for s in model.seen] == [
        (101, True, False),
        (202, True, False),
        (101, False, False),
        (202, False, False),
        (101, False, True),
        (202, False, True),
    ]
    # The control inputs, as Triton fills them.
    first, last = model.seen[0]["controls"], model.seen[4]["controls"]
    assert first == {"START": 1, "END": 0.0, "READY": True, "CORRID": 101}
    assert last == {"START": 0, "END": 1.0, "READY": True, "CORRID": 101}
    batching = config["sequence_batching"]
    assert strategy.value in batching
    assert batching["max_sequence_idle_microseconds"] == "30000000"
    assert "dynamic_batching" not in config


def test_string_ids_over_http_and_a_sequence_that_times_out_idle(triton: Triton) -> None:
    """String correlation ids need no control input: request.sequence_id is the string.
    A sequence idle past max_sequence_idle_microseconds is ended by Triton without an END
    request (its state stays with the callable), and its next request without START is
    refused by Triton."""
    model = Accumulator()
    batcher = SequenceBatcher(max_sequence_idle_microseconds=300_000)
    triton.bind("Acc", model, **IO, config=ModelConfig(max_batch_size=4, sequence_batcher=batcher))
    triton.run()
    with httpclient.InferenceServerClient(urls(triton)[0].removeprefix("http://")) as client:
        assert _interleaved(client, "Acc", "seq-a", "seq-b") == [1, 10, 3, 30, 6, 60]
        assert _send(client, "Acc", "idle", 5, True, False) == 5
        refused = None
        for wait in (1.0, 2.0, 4.0, 8.0):  # past the idle time (a request would restart it)
            time.sleep(wait)
            try:
                _send(client, "Acc", "idle", 0, False, False)
            except InferenceServerException as e:
                refused = str(e)
                break
    assert refused is not None and "must specify the START flag" in refused
    assert [s["id"] for s in model.seen[:2]] == ["seq-a", "seq-b"]
    assert model.state == {"idle": 5}  # no END reached the callable


class IdleAware(Accumulator):
    """An Accumulator that drops a sequence's state when Triton ends it for being idle."""

    def __init__(self) -> None:
        super().__init__()
        self.idle: List[Any] = []

    def sequence_idle(self, sequence_id: Union[int, str]) -> None:
        self.idle.append((sequence_id, self.state.pop(sequence_id, None)))


@pytest.mark.parametrize("strategy", list(SequenceStrategy), ids=lambda s: s.value)
def test_a_callable_with_sequence_idle_is_told_of_a_sequence_triton_ended(
    triton: Triton, strategy: SequenceStrategy
) -> None:
    """pybackend's extension (README, "Stateful models"): a callable object's own
    ``sequence_idle(sequence_id)`` is called once for each sequence Triton ended for being
    idle, after Triton ended it; never for one that ENDed."""
    model = IdleAware()
    batcher = SequenceBatcher(strategy=strategy, max_sequence_idle_microseconds=600_000)
    triton.bind("Acc", model, **IO, config=ModelConfig(max_batch_size=4, sequence_batcher=batcher))
    triton.run()
    with httpclient.InferenceServerClient(urls(triton)[0].removeprefix("http://")) as client:
        assert _send(client, "Acc", 7, 5, True, False) == 5
        assert _send(client, "Acc", "gone", 2, True, False) == 2
        assert _send(client, "Acc", 8, 1, True, False) == 1
        assert _send(client, "Acc", 8, 1, False, True) == 2
        deadline = time.monotonic() + 10
        while len(model.idle) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(model.idle, key=lambda call: str(call[0])) == [(7, 5), ("gone", 2)]
        with pytest.raises(InferenceServerException, match="must specify the START flag"):
            _send(client, "Acc", 7, 1, False, False)
        time.sleep(0.5)
    assert len(model.idle) == 2 and model.state == {}


def test_requests_outside_sequences_have_neutral_attributes() -> None:
    r = Request(data={})
    assert (r.sequence_id, r.sequence_start, r.sequence_end) == (0, False, False)


@pytest.mark.parametrize(
    "config,text",
    [
        (
            ModelConfig(
                batcher=DynamicBatcher(max_queue_delay_microseconds=10),
                sequence_batcher=SequenceBatcher(),
            ),
            "not both",
        ),
        (
            ModelConfig(
                sequence_batcher=SequenceBatcher(
                    control_inputs=[SequenceControlInput("S", SequenceControl.START, np.int64)]
                )
            ),
            "use np.int32, np.float32 or np.bool_",
        ),
        (
            ModelConfig(
                sequence_batcher=SequenceBatcher(
                    control_inputs=[SequenceControlInput("C", SequenceControl.CORRID, np.float32)]
                )
            ),
            "use np.uint64",
        ),
        (
            ModelConfig(
                sequence_batcher=SequenceBatcher(
                    control_inputs=[SequenceControlInput("C", SequenceControl.CORRID, bytes)]
                )
            ),
            "String correlation ids need no control input",
        ),
    ],
    ids=["two-batchers", "flag-dtype", "corrid-dtype", "corrid-string"],
)
def test_bad_sequence_configs_are_refused_at_bind(
    triton: Triton, config: ModelConfig, text: str
) -> None:
    with pytest.raises(PyTritonBadParameterError, match=text):
        triton.bind("Bad", Accumulator(), **IO, config=config)
