"""BLS from processes that model.py forks (fork_route.py), in a real stub process driven by
the Python fake backend: a child's calls reach the backend through the stub, big inputs are
placed in the stub's arena there, streams and cancel work, a grandchild routes through its
parent, and what a child cannot do fails at once with a clear error instead of waiting."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_backend import FakeBackend, started, wait_until, write_model  # noqa: E402
from test_stub_bls import CALL_HELPERS, FakeCallee, run_mode  # noqa: E402

from pybackend.ipc import codec  # noqa: E402
from pybackend.ipc.protocol import Location, MessageKind, Owner  # noqa: E402

FORKER = CALL_HELPERS + textwrap.dedent(
    """
    def out(resp):
        if resp.has_error():
            return {"error": resp.error().message()}
        ts = resp.output_tensors()
        return ts[0].as_numpy().tolist() if ts else None

    def in_child(fn):
        # fn runs in a forked child; its JSON result comes back through a pipe.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                os.write(w, json.dumps(fn()).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            data = f.read()
        os.waitpid(pid, 0)
        return json.loads(data or b"null")

    def attempt(fn):
        try:
            return ["ok", fn()]
        except Exception as e:
            return ["raised", str(e)]

    class TritonPythonModel:
        def execute(self, requests):
            self.request = requests[0]
            mode = requests[0].inputs()[0].as_numpy().tobytes().decode()
            result = getattr(self, mode)()
            text = np.array([json.dumps(result).encode()], np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("R", text)])]

        def calls(self):
            return in_child(lambda: [
                out(call("double", np.array([1, 2], np.float32))),
                out(call("double", np.full(5000, 3, np.float32)))[:2],
                [out(r) for r in call("s", np.array([3], np.float32), decoupled=True)],
                out(call("missing", np.array([1], np.float32))),
            ])

        def cancel(self):
            def child():
                it = call("slow", np.array([1], np.float32), decoupled=True)
                it.cancel()
                return [out(r) for r in it]
            return in_child(child)

        def big_outputs(self):
            return in_child(lambda: [out(call("big", np.array([i, 1], np.float32)))
                                     for i in range(3)])

        def grandchild(self):
            return in_child(lambda: in_child(
                lambda: out(call("double", np.array([7], np.float32)))))

        def refusals(self):
            request = self.request
            def child():
                empty = pb_utils.Tensor.empty("E", [4], np.float32)
                return {
                    "cancelled": attempt(request.is_cancelled),
                    "ready": attempt(lambda: pb_utils.is_model_ready("m")),
                    "empty": empty.as_numpy().shape[0],
                    "logged": attempt(lambda: pb_utils.Logger.log_info("from the child")),
                }
            return in_child(child)
    """
)


def forker(repo: Path) -> FakeBackend:
    return started(write_model(repo, "forker", FORKER))


def test_a_forked_child_calls_through_the_stub(repo: Path) -> None:
    with forker(repo) as fb:
        callee = FakeCallee(fb)
        result = run_mode(fb, "calls")
        assert result == [
            [2.0, 4.0],
            [6.0, 6.0],
            [[0.0], [1.0], [2.0], None],
            {"error": "no model 'missing'"},
        ]
        # The stub made the calls (on async: they come from a thread of its own) and placed
        # the big input in its arena, as for a call of its own.
        assert set(callee.channels) == {"async"}
        assert callee.calls[1].inputs[0].location == Location.STUB_ARENA
        assert callee.calls[0].inputs[0].location == Location.INLINE


def test_backend_blocks_of_a_forked_childs_calls_go_home(repo: Path) -> None:
    # The answers lie in the backend's arena (3 MiB each); the stub copies them to the child
    # and returns every block.
    with forker(repo) as fb:
        FakeCallee(fb)
        # The real backend announces a new segment on the channel that carries the first
        # reference to it (here async: the stub makes a child's calls from a thread); the
        # fake announces on sync, which the stub's main thread, waiting for the child, does
        # not read meanwhile.
        fb.arena.announce = lambda seg, size, fd: fb.async_.send(
            MessageKind.SEGMENT_ADD, codec.encode_segment_add(Owner.BACKEND, seg, size), fds=[fd]
        )
        assert run_mode(fb, "big_outputs") == [[0.0, 2.0], [2.0, 2.0], [4.0, 2.0]]
        assert wait_until(lambda: fb.arena.used_bytes == 0), fb.arena.used_bytes


def test_a_forked_childs_cancel_reaches_the_backend(repo: Path) -> None:
    with forker(repo) as fb:
        callee = FakeCallee(fb)
        assert run_mode(fb, "cancel") == [[0.0], None]
        assert len(callee.cancels) == 1


def test_a_grandchild_routes_through_its_parent(repo: Path) -> None:
    with forker(repo) as fb:
        FakeCallee(fb)
        assert run_mode(fb, "grandchild") == [14.0]


def test_what_a_forked_child_cannot_do_fails_at_once_with_the_reason(repo: Path) -> None:
    with forker(repo) as fb:
        result = run_mode(fb, "refusals")
        for key in ("cancelled", "ready"):
            status, text = result[key]
            assert status == "raised", result
            assert "not supported in a process forked by model.py of instance 'm_0_0'" in text
            assert "Do it in the model's own process" in text
        assert result["empty"] == 4  # Tensor.empty falls back to process memory there
        assert result["logged"] == ["ok", None]  # to stderr: the channels are the stub's
