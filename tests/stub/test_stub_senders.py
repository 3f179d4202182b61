"""Response senders in the stub process (fake backend): a request left open after execute
is watched, and when its sender is dropped without FINAL the backend hears SENDER_DROPPED
(UV-10); a sender that finishes or an answered request is not reported. A rescheduled
decoupled request is reported too: the backend keeps that execution's response factory for
a sender kept from it (a thread's) and frees it then (docs/protocol.md, "Rescheduled
requests")."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fake_backend import started, wait_until, write_model  # noqa: E402

MODEL = textwrap.dedent(
    """
    import gc
    import threading
    import weakref
    import numpy as np
    import triton_python_backend_utils as pb_utils

    FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL

    def out(v):
        return pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([v]))])

    class TritonPythonModel:
        def initialize(self, args):
            self.refs = []
            self.kept = []

        def execute(self, requests):
            for r in requests:
                mode = int(r.inputs()[0].as_numpy()[0])
                if mode == 0:  # hand the sender to a thread that sends once and drops it
                    def work(sender=r.get_response_sender()):
                        sender.send(out(1))
                        self.refs.append(weakref.ref(sender))
                    t = threading.Thread(target=work)
                    t.start()
                    t.join()
                elif mode == 1:  # keep it, finish later
                    self.kept.append(r.get_response_sender())
                elif mode == 2:  # finish from the kept senders
                    for s in self.kept:
                        s.send(out(2), flags=FINAL)
                    self.kept.clear()
                    r.get_response_sender().send(flags=FINAL)
                elif mode == 3:
                    r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
                elif mode == 4:  # report whether the dropped senders are gone
                    gc.collect()
                    alive = sum(ref() is not None for ref in self.refs)
                    r.get_response_sender().send(out(alive), flags=FINAL)
            return None
    """
)


def test_dropped_senders_are_reported_and_freed(repo: Path) -> None:
    mf = write_model(repo, "senders", MODEL)
    with started(mf, decoupled=True) as fb:
        res = fb.execute([{"X": np.array([0])}], request_kwargs=[{"token": 10}])
        assert res["items"] == [{"none": True, "release_flags": 1}]
        # The request and its sender die when execute's batch is dropped: no gc needed.
        assert wait_until(lambda: fb.dropped == [10])
        fb.execute([{"X": np.array([1])}], request_kwargs=[{"token": 11}])
        fb.execute([{"X": np.array([3])}], request_kwargs=[{"token": 12}])
        fb.execute([{"X": np.array([2])}], request_kwargs=[{"token": 13}])
        fb.execute([{"X": np.array([4])}], request_kwargs=[{"token": 14}])
        assert wait_until(lambda: any(t == 14 for t, *_ in fb.sends))
        # Finished and answered ones are not reported; the rescheduled one (12) is.
        assert wait_until(lambda: fb.dropped == [10, 12])
        (alive,) = [int(r["outputs"]["Y"][0]) for t, f, r in fb.sends if t == 14]
        assert alive == 0  # the dropped sender was freed (weakref dead)
        assert [(t, f) for t, f, _ in fb.sends] == [(10, 0), (11, 1), (13, 1), (14, 1)]
        fb.finalize()


def test_default_mode_sender_kept_then_dropped(repo: Path) -> None:
    src = textwrap.dedent(
        """
        class TritonPythonModel:
            def initialize(self, args):
                self.kept = None

            def execute(self, requests):
                (r,) = requests
                if self.kept is None:
                    self.kept = r.get_response_sender()  # answered later ... or never
                else:
                    self.kept = None  # dropped unused
                    return [None]
                return None
        """
    )
    mf = write_model(repo, "kept", src)
    with started(mf) as fb:
        res = fb.execute([{"X": np.array([0])}], request_kwargs=[{"token": 20}])
        assert res["items"] == [{"none": True, "release_flags": 1}]
        assert fb.dropped == []
        res = fb.execute([{"X": np.array([0])}], request_kwargs=[{"token": 21}])
        # Token 21 never had a sender: answered with an error in RESULT (not watched).
        assert "execute returned None" in res["items"][0]["error"][1]
        assert wait_until(lambda: fb.dropped == [20])
        fb.finalize()
