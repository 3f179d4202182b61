"""A model's ``sequence_idle(correlation_id)`` (pybackend/stub/sequence_idle.py): told of a
sequence tritonserver's sequence batcher ended for being idle, in every engine: a real
tritonserver with our backend (a stub process per instance, and ``shared``), a StubModel and
the in-process harness. The server ends such a sequence without any request reaching the
model (tests/conformance/config_features/test_sequence_batcher.py); the hook is called after
the server ended it (the sequence's next request without START is refused), once, with the
id the model saw (an int or a string), never for a sequence that ENDed."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List

import numpy as np
import pytest
from model_dirs import write_model

from pybackend.testing import InferError, ModelHarness, ServerModel, StubModel

# Long enough that a loaded machine's gaps between a sequence's requests stay below it (0.6 s
# was not, once, in a CI rehearsal: sequence 11 idled while two other requests were served).
IDLE_US = 1_000_000
CONFIG = (
    """
name: "{name}"
backend: "python"
max_batch_size: 0
sequence_batching {{ max_sequence_idle_microseconds: %d }}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]
{extra}
"""
    % IDLE_US
)
MODE = 'parameters {{ key: "PYBACKEND_INSTANCE_PROCESS" value: {{ string_value: "{}" }} }}'

# The running sum of IN per sequence; INFO: the sum, the sequences the model holds state for
# and every sequence_idle call so far (the id, its type, the state it dropped, whether it came
# during an execute that must exclude it).
COMMON = """
import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def answer(self, request):
    cid, flags = request.correlation_id(), request.flags()
    if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START:
        self.sums[cid] = 0
    self.sums[cid] += int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
    info = {"sum": self.sums[cid], "open": sorted(map(str, self.sums)), "idle": self.idle}
    if flags & pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END:
        del self.sums[cid]
    text = np.array([json.dumps(info).encode()], np.object_)
    return pb_utils.InferenceResponse([pb_utils.Tensor("INFO", text)])


class Base:
    def initialize(self, args):
        self.sums, self.idle, self.executing, self.serving = {}, [], False, set()

    def forget(self, cid):
        # Whether an execute was running (a plain one), or serving the sequence (async).
        during = self.executing or cid in self.serving
        self.idle.append([cid, type(cid).__name__, self.sums.pop(cid, None), during])
"""
MODELS = {
    "seq_hook": COMMON
    + """
class TritonPythonModel(Base):
    def execute(self, requests):
        self.executing = True
        try:
            return [answer(self, r) for r in requests]
        finally:
            self.executing = False

    def sequence_idle(self, correlation_id):
        self.forget(correlation_id)
""",
    "seq_hook_async": COMMON
    + """
class TritonPythonModel(Base):
    async def execute(self, requests):
        # The hook may run on the loop while this awaits, never for a sequence it serves.
        served = {r.correlation_id() for r in requests}
        self.serving |= served
        try:
            await asyncio.sleep(0.05)
            return [answer(self, r) for r in requests]
        finally:
            self.serving -= served

    async def sequence_idle(self, correlation_id):
        await asyncio.sleep(0)
        self.forget(correlation_id)
""",
    "seq_hook_raises": COMMON
    + """
class TritonPythonModel(Base):
    def execute(self, requests):
        return [answer(self, r) for r in requests]

    def sequence_idle(self, correlation_id):
        self.forget(correlation_id)
        raise ValueError(f"cannot drop {correlation_id}")
""",
}
ENGINES: Dict[str, Callable[[Path], Any]] = {
    "inprocess": ModelHarness,
    "stub": StubModel,
    "server": ServerModel,
    "server-shared": ServerModel,
    "server-fork": ServerModel,
}


# Every engine with the plain hook; the coroutine one where its loop differs (the shared and
# fork modes run the same dispatcher as a stub process).
CASES = [(engine, "seq_hook") for engine in ENGINES] + [
    (engine, "seq_hook_async") for engine in ("inprocess", "stub", "server")
]


def _start(tmp_path: Path, engine: str, name: str) -> Any:
    extra = MODE.format(engine.split("-")[1]) if "-" in engine else ""
    model_dir = write_model(tmp_path, name, MODELS[name], CONFIG.format(name=name, extra=extra))
    return ENGINES[engine](model_dir)


def _step(model: Any, cid: Any, value: int, **flags: bool) -> Dict[str, Any]:
    out = model.infer({"IN": np.array([value], np.int32)}, sequence_id=cid, **flags)
    return json.loads(out["INFO"][0])


def _idle_calls(model: Any, probe: Iterator[int]) -> List[List[Any]]:
    """The model's sequence_idle calls so far, asked by a sequence of its own (START and END
    in one request: it ends at once, and is never idle)."""
    return _step(model, next(probe), 0, sequence_start=True, sequence_end=True)["idle"]


def _until_called(model: Any, probe: Iterator[int], count: int) -> List[List[Any]]:
    deadline = time.monotonic() + 10 * IDLE_US / 1e6 + 5
    while True:
        calls = _idle_calls(model, probe)
        if len(calls) >= count or time.monotonic() > deadline:
            return calls
        time.sleep(0.05)


@pytest.mark.parametrize("engine,name", CASES)
def test_the_model_is_told_of_each_sequence_the_server_ended_for_being_idle(
    tmp_path: Path, engine: str, name: str
) -> None:
    probe = iter(range(1000, 2000))
    with _start(tmp_path, engine, name) as model:
        assert _step(model, 11, 5, sequence_start=True)["sum"] == 5
        assert _step(model, 11, 2)["sum"] == 7
        assert _step(model, "text-id", 1, sequence_start=True)["sum"] == 1
        assert _step(model, 12, 3, sequence_start=True)["open"] == ["11", "12", "text-id"]
        assert _step(model, 12, 4, sequence_end=True)["sum"] == 7  # ended: never idle
        calls = _until_called(model, probe, 2)
        calls.sort(key=lambda call: str(call[0]))
        assert calls == [[11, "int", 7, False], ["text-id", "str", 1, False]]
        # Told after the server ended it: the sequence's next request without START is
        # refused before the model, and a START begins it again from nothing.
        with pytest.raises(InferError) as refused:
            _step(model, 11, 1)
        assert refused.value.message == (
            f"inference request for sequence 11 to model '{name}' must specify the START flag "
            "on the first request of the sequence"
        )
        assert _step(model, 11, 6, sequence_start=True)["sum"] == 6
        calls = _until_called(model, probe, 3)
        assert len(calls) == 3 and calls[2] == [11, "int", 6, False]
        time.sleep(IDLE_US / 1e6 + 0.3)  # what a wrong call would take to come
        assert _idle_calls(model, probe) == calls  # once each, none for 12 or the probes


def test_a_hook_that_raises_is_logged_and_the_model_serves_on(tmp_path: Path) -> None:
    """Offline the log is the model's (a server writes it to its log, at ERROR)."""
    for engine in ("inprocess", "stub"):
        probe = iter(range(1000, 2000))
        with _start(tmp_path / engine, engine, "seq_hook_raises") as model:
            _step(model, 21, 1, sequence_start=True)
            assert _until_called(model, probe, 1) == [[21, "int", 1, False]]
            deadline = time.monotonic() + 5
            while not [r for r in model.logs if "sequence_idle(21)" in r.message]:
                assert time.monotonic() < deadline, [r.message for r in model.logs]
                time.sleep(0.05)
            (record,) = [r for r in model.logs if "sequence_idle(21)" in r.message]
            assert record.level == 2  # ERROR
            assert re.match(
                r"sequence_idle\(21\) of model 'seq_hook_raises', instance 'seq_hook_raises_0"
                r"(_0)?' raised \(the server ended the sequence after "
                r"max_sequence_idle_microseconds; its state is the model's to drop, and it "
                r"stays ended\): ValueError: cannot drop 21\n\nAt:\n",
                record.message,
            ), record.message
            assert _step(model, 22, 4, sequence_start=True, sequence_end=True)["sum"] == 4
