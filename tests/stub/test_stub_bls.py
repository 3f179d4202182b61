"""BLS and model control in a real stub process, driven by the Python fake backend: many
calls in flight from threads with answers out of order, streams, cancel, the backend going
away mid-call, and model-control replies and errors."""

from __future__ import annotations

import random
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any, List

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_backend import FakeBackend, started, write_model  # noqa: E402

from pybackend.ipc import bls_codec, codec  # noqa: E402
from pybackend.ipc.protocol import Location, MessageKind  # noqa: E402

FINAL = 1


class FakeCallee:
    """Answers BLS_EXEC like a model 'double' (OUT = 2 * IN), or streams COUNT responses,
    from its own threads after a random delay, so answers arrive out of order. A call made
    on sync (the stub's execute thread) is answered on sync, as the real backend does."""

    def __init__(self, fb: FakeBackend, answer: bool = True) -> None:
        self.fb = fb
        self.answer = answer
        self.calls: List[Any] = []
        self.channels: List[str] = []  # "sync" / "async" per call, in arrival order
        self.cancels: List[int] = []
        fb.handlers[MessageKind.BLS_EXEC] = lambda msg: self.on_exec(msg, fb.async_)
        fb.sync_handlers[MessageKind.BLS_EXEC] = lambda msg: self.on_exec(msg, fb.sync)
        fb.handlers[MessageKind.BLS_CANCEL] = lambda msg: self.cancels.append(msg.id)

    def on_exec(self, msg: Any, channel: Any) -> None:
        desc = bls_codec.decode_bls_exec(msg.body)
        values = []
        for t in desc.inputs:
            if t.location == Location.INLINE:
                values.append(np.frombuffer(bytes(t.data), np.float32))
            else:
                mm = self.fb.peer.get(t.seg, t.offset, t.byte_size)
                values.append(np.frombuffer(mm, np.float32, t.byte_size // 4, t.offset).copy())
        self.calls.append(desc)
        self.channels.append("sync" if channel is self.fb.sync else "async")
        if self.answer:
            args = (channel, msg.id, desc, values)
            threading.Thread(target=self.reply, args=args, daemon=True).start()

    def reply(self, channel: Any, cid: int, desc: Any, values: List[np.ndarray]) -> None:
        time.sleep(random.uniform(0, 0.02) + (0.3 if desc.model_name == "slow" else 0))
        if desc.model_name == "missing":
            err = codec.ResponseDesc((), "", (2, "no model 'missing'"))
            self.send(channel, cid, FINAL, err)
            return
        if desc.decoupled:
            for i in range(int(values[0][0])):
                self.send(channel, cid, 0, self.response(np.array([i], np.float32)))
            self.send(channel, cid, FINAL, None)
            return
        if desc.model_name == "split":
            # The response, then FINAL alone (an ensemble's callbacks may come like this).
            self.send(channel, cid, 0, self.response(values[0] * 2))
            self.send(channel, cid, FINAL, None)
            return
        if desc.model_name == "big":
            # An output in the backend's arena, in a segment the stub has not heard of yet
            # (its SEGMENT_ADD goes out on sync first).
            out = (values[0] * 2).astype(np.float32)
            seg, off = self.fb.arena.alloc(3 << 20)
            self.fb.arena.write(seg, off, memoryview(out.tobytes()))
            td = codec.TensorDesc(
                "OUT", 11, Location.BACKEND_ARENA, out.shape, out.nbytes, seg=seg, offset=off
            )
            self.send(channel, cid, FINAL, codec.ResponseDesc([td], '{"k": 2}'))
            return
        self.send(channel, cid, FINAL, self.response(values[0] * 2))

    def response(self, value: np.ndarray) -> codec.ResponseDesc:
        raw = value.astype(np.float32).tobytes()
        out = codec.TensorDesc("OUT", 11, Location.INLINE, value.shape, len(raw), data=raw)
        return codec.ResponseDesc([out], '{"k": 1}')

    def send(self, channel: Any, cid: int, flags: int, resp: Any) -> None:
        channel.send(MessageKind.BLS_RESPONSE, bls_codec.encode_bls_response(flags, resp), cid)


# The start of a model.py that calls model `model` with IN = value (the fork tests use it too).
CALL_HELPERS = textwrap.dedent(
    """
    import json, os, threading
    import numpy as np
    import triton_python_backend_utils as pb_utils

    def call(model, value, decoupled=False):
        req = pb_utils.InferenceRequest(
            model_name=model, inputs=[pb_utils.Tensor("IN", value)],
            requested_output_names=["OUT"])
        return req.exec(decoupled=decoupled)
    """
)

CALLER = CALL_HELPERS + textwrap.dedent(
    """
    def out(resp):
        if resp.has_error():
            return {"error": resp.error().message(), "code": int(resp.error().code())}
        ts = resp.output_tensors()
        return {"out": ts[0].as_numpy().tolist() if ts else None,
                "params": json.loads(resp.parameters())}

    class TritonPythonModel:
        def execute(self, requests):
            mode = requests[0].inputs()[0].as_numpy().tobytes().decode()
            result = getattr(self, mode)()
            text = np.array([json.dumps(result).encode()], np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("R", text)])]

        def threads(self):
            results = [None] * 24
            def work(i):
                big = np.full(5000, i, np.float32)  # over the inline threshold
                results[i] = [out(call("double", np.array([i], np.float32)))["out"],
                              out(call("double", big))["out"][0]]
            ts = [threading.Thread(target=work, args=(i,)) for i in range(len(results))]
            for t in ts: t.start()
            for t in ts: t.join()
            return results

        def stream(self):
            return [out(r) for r in call("s", np.array([3], np.float32), decoupled=True)]

        def error(self):
            return out(call("missing", np.array([1], np.float32)))

        def cancel(self):
            it = call("slow", np.array([1], np.float32), decoupled=True)
            it.cancel()  # the fake answers "slow" after 0.3 s: the call is in flight
            return [out(r) for r in it]

        def backend_gone(self):
            # From a thread of the model: such calls go on the async channel.
            box = []
            t = threading.Thread(
                target=lambda: box.append(out(call("double", np.array([1], np.float32)))))
            t.start()
            t.join()
            return box[0]

        def main_thread(self):
            return [out(call("double", np.array([i], np.float32))) for i in range(3)]

        def split(self):
            return [out(call("split", np.array([i], np.float32))) for i in (2, 3)]

        def big(self):
            return out(call("big", np.array([1, 2], np.float32)))

        def control(self):
            ready = pb_utils.is_model_ready("m", "3")
            try:
                pb_utils.load_model("m", config='{"x": 1}', files={"file:a.txt": b"hi"})
                load = "ok"
            except pb_utils.TritonModelException as e:
                load = str(e)
            return {"ready": ready, "load": load}
    """
)


def run_mode(fb: FakeBackend, mode: str) -> Any:
    import json

    reply = fb.execute([{"MODE": np.frombuffer(mode.encode(), np.uint8)}])
    assert "items" in reply, reply
    return json.loads(reply["items"][0]["outputs"]["R"][0])


def caller(repo: Path) -> FakeBackend:
    return started(write_model(repo, "caller", CALLER))


def test_many_calls_in_flight_answered_out_of_order(repo: Path) -> None:
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        results = run_mode(fb, "threads")
        assert results == [[[2.0 * i], 2.0 * i] for i in range(24)]
        assert len(callee.calls) == 48
        arena_inputs = [c for c in callee.calls if c.inputs[0].location == Location.STUB_ARENA]
        assert len(arena_inputs) == 24
        assert set(callee.channels) == {"async"}


def test_exec_from_execute_goes_on_sync(repo: Path) -> None:
    """A blocking call made by the thread running execute goes on sync (the backend's
    instance thread waits there for RESULT and answers); calls from the model's own threads
    (above) stay on async."""
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        assert run_mode(fb, "main_thread") == [
            {"out": [2.0 * i], "params": {"k": 1}} for i in range(3)
        ]
        assert callee.channels == ["sync"] * 3
        # The next batch runs normally after calls on sync.
        assert run_mode(fb, "error") == {"error": "no model 'missing'", "code": 2}
        assert callee.channels == ["sync"] * 4


def test_exec_on_sync_takes_the_response_before_a_lone_final(repo: Path) -> None:
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        # The response is what the call returns, not the empty FINAL after it; the next
        # call in the same execute gets its own answer.
        assert run_mode(fb, "split") == [
            {"out": [4.0], "params": {"k": 1}},
            {"out": [6.0], "params": {"k": 1}},
        ]
        assert callee.channels == ["sync", "sync"]


def test_exec_on_sync_reads_a_segment_announced_before_the_answer(repo: Path) -> None:
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        assert run_mode(fb, "big") == {"out": [2.0, 4.0], "params": {"k": 2}}
        assert callee.channels == ["sync"]


def test_stream_and_parameters(repo: Path) -> None:
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        assert run_mode(fb, "stream") == [
            {"out": [0.0], "params": {"k": 1}},
            {"out": [1.0], "params": {"k": 1}},
            {"out": [2.0], "params": {"k": 1}},
            {"out": None, "params": {}},
        ]
        assert callee.channels == ["async"]  # decoupled calls always go on async


def test_error_response_keeps_code(repo: Path) -> None:
    with caller(repo) as fb:
        FakeCallee(fb)
        assert run_mode(fb, "error") == {"error": "no model 'missing'", "code": 2}


def test_cancel_reaches_the_backend(repo: Path) -> None:
    with caller(repo) as fb:
        callee = FakeCallee(fb)
        run_mode(fb, "cancel")
        assert len(callee.calls) == 1
        assert callee.cancels == [1]  # the stub numbers its calls from 1


def test_backend_gone_fails_the_waiting_call(repo: Path) -> None:
    with caller(repo) as fb:
        FakeCallee(fb, answer=False)
        # Close only the async channel: the stub's reader sees EOF and fails the call; the
        # sync channel still carries the RESULT.
        threading.Timer(0.3, lambda: fb.async_.sock.shutdown(2)).start()
        result = run_mode(fb, "backend_gone")
        assert result["code"] == 1
        assert "the backend closed the channel" in result["error"]


def test_model_control_rpcs(repo: Path) -> None:
    with caller(repo) as fb:
        seen = []

        def ready(msg: Any) -> None:
            r = codec.Reader(msg.body)
            seen.append(("ready", r.str(), r.unpack(codec.I64)[0]))
            fb.async_.send(MessageKind.REPLY, codec.encode_reply(True, payload=b"\x01"), msg.id)

        def load(msg: Any) -> None:
            r = codec.Reader(msg.body)
            seen.append(("load", r.str(), r.str(), r.u32(), r.str(), bytes(r.blob())))
            fb.async_.send(MessageKind.REPLY, codec.encode_reply(False, 1, "it broke"), msg.id)

        fb.handlers[MessageKind.MODEL_READY] = ready
        fb.handlers[MessageKind.MODEL_LOAD] = load
        assert run_mode(fb, "control") == {
            "ready": True,
            "load": "Failed to load model: Failed to process the request for model 'm_0_0', "
            "message: it broke",
        }
        assert seen == [("ready", "m", 3), ("load", "m", '{"x": 1}', 1, "file:a.txt", b"hi")]
