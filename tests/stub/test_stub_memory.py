"""Shared-memory behaviour of the stub process: indirect bodies, arena growth and idle
release, input blocks kept while Python holds them, SEGMENT_ADD on either channel."""

from __future__ import annotations

import sys
import textwrap
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_backend import started, wait_until, write_model  # noqa: E402

from pybackend.ipc import codec  # noqa: E402
from pybackend.ipc.protocol import MAX_INLINE_BODY, Location, MessageKind, Owner  # noqa: E402

ECHO = textwrap.dedent(
    """
    import json
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            out = []
            for r in requests:
                tensors = [pb_utils.Tensor("O_" + t.name(), t.as_numpy().copy())
                           for t in r.inputs()]
                pad = "x" * json.loads(r.parameters()).get("pad", 0)
                out.append(pb_utils.InferenceResponse(tensors, parameters={"pad": pad}))
            return out
    """
)


def test_indirect_execute_and_result(repo: Path) -> None:
    mf = write_model(repo, "echo", ECHO)
    with started(mf) as fb:
        # 60 inline inputs of 4 KiB: the EXECUTE body goes through the backend arena.
        inputs = {f"I{i}": np.full(1024, i, np.float32) for i in range(60)}
        pad = MAX_INLINE_BODY + 1000  # response parameters big enough for an indirect RESULT
        res = fb.execute(
            [inputs], arena=False, request_kwargs=[{"parameters": '{"pad": %d}' % pad}]
        )
        (item,) = res["items"]
        assert len(item["outputs"]) == 60
        for i in range(60):
            np.testing.assert_array_equal(item["outputs"][f"O_I{i}"], np.full(1024, i, np.float32))
        assert len(item["parameters"]) > MAX_INLINE_BODY
        # Every block went home: the indirect EXECUTE body and the RESULT body.
        fb.execute([{"X": np.zeros(1)}])
        assert wait_until(lambda: fb.arena.used_bytes == 0)
        fb.finalize()


def test_stub_arena_grows_and_releases_idle_segments(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                n = int(requests[0].inputs()[0].as_numpy()[0])
                return [pb_utils.InferenceResponse([pb_utils.Tensor("O", np.ones(n, np.uint8))])]
        """
    )
    mf = write_model(repo, "grow", src)
    with started(mf) as fb:
        for n in (100_000, 3 << 20, 5 << 20):
            (item,) = fb.execute([{"N": np.array([n], np.int64)}])["items"]
            assert item["outputs"]["O"].sum() == n
            assert item["where"]["O"] == Location.STUB_ARENA
        seen = set(fb.peer.segments)
        assert len(seen) >= 2
        # Our FREEs travel before the next EXECUTE; after ~1 s the extra segments go.
        fb.execute([{"N": np.array([0], np.int64)}])
        assert wait_until(lambda: len(fb.peer.segments) == 1, timeout=5), fb.peer.segments
        assert 0 in fb.peer.segments
        fb.finalize()


def test_inputs_kept_by_the_model_stay_valid(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def initialize(self, args):
                self.kept = []

            def execute(self, requests):
                if requests[0].inputs()[0].name() == "KEEP":
                    self.kept.append(requests[0].inputs()[0].as_numpy()[10:20])
                    total = 0.0
                else:
                    total = float(sum(k.sum() for k in self.kept))
                    if requests[0].inputs()[0].name() == "DROP":
                        self.kept.clear()
                return [pb_utils.InferenceResponse([pb_utils.Tensor("S", np.array([total]))])]
        """
    )
    mf = write_model(repo, "keep", src)
    with started(mf) as fb:
        fb.execute([{"KEEP": np.arange(4096, dtype=np.float64)}], arena=True)
        used = fb.arena.used_bytes
        assert used >= 4096 * 8
        time.sleep(0.2)
        fb.execute([{"X": np.zeros(1)}], arena=False)
        time.sleep(0.2)
        assert fb.arena.used_bytes == used  # still viewed by the model: not freed
        (item,) = fb.execute([{"DROP": np.zeros(1)}], arena=False)["items"]
        assert item["outputs"]["S"][0] == sum(range(10, 20))
        assert wait_until(lambda: fb.arena.used_bytes == 0)
        fb.finalize()


def test_segment_announced_on_the_async_channel(repo: Path) -> None:
    """A backend segment announced on async (not sync) is waited for and found."""
    mf = write_model(repo, "echo", ECHO)
    with started(mf) as fb:
        fb._announce = lambda seg, size, fd: fb.async_.send(  # type: ignore[method-assign]
            MessageKind.SEGMENT_ADD, codec.encode_segment_add(Owner.BACKEND, seg, size), fds=[fd]
        )
        fb.arena.announce = fb._announce
        big = np.arange(3 << 18, dtype=np.float32)  # 3 MiB: a second backend segment
        fb.execute([{"A": np.zeros(1 << 18, np.float32)}], arena=True)
        (item,) = fb.execute([{"B": big}], arena=True)["items"]
        np.testing.assert_array_equal(item["outputs"]["O_B"], big)
        fb.finalize()


def test_unknown_segment_fails_the_batch_within_the_bound(repo: Path) -> None:
    mf = write_model(repo, "echo", ECHO)
    with started(mf) as fb:
        bad = codec.TensorDesc("X", 11, Location.BACKEND_ARENA, (4,), 16, seg=42, offset=0)
        body = codec.encode_execute([codec.RequestDesc(1, inputs=[bad])])
        t0 = time.monotonic()
        fb.sync.send(MessageKind.EXECUTE, body, 9)
        msg = fb.sync.recv()
        result = codec.decode_result(msg.body)
        assert 4 < time.monotonic() - t0 < 15
        assert "segment 42" in result.error[1]
        fb.finalize()


def test_out_of_bounds_reference_fails_the_batch(repo: Path) -> None:
    mf = write_model(repo, "echo", ECHO)
    with started(mf) as fb:
        fb.execute([{"A": np.zeros(2048, np.float32)}], arena=True)  # maps segment 0
        bad = codec.TensorDesc(
            "X", 11, Location.BACKEND_ARENA, (4,), 16, seg=0, offset=(1 << 20) - 8
        )
        fb.sync.send(
            MessageKind.EXECUTE, codec.encode_execute([codec.RequestDesc(1, inputs=[bad])]), 3
        )
        result = codec.decode_result(fb.sync.recv().body)
        assert "outside segment 0" in result.error[1]
        fb.finalize()


def test_blocks_of_a_batch_that_fails_to_decode_are_returned(repo: Path) -> None:
    mf = write_model(repo, "echo", ECHO)
    with started(mf) as fb:
        good = fb.make_input("A", np.zeros(2048, np.float32), arena=True)
        bad = fb.make_input("B", np.zeros(2048, np.float32), arena=True)
        bad.dims = (5,)  # 8 KiB do not hold 5 FP32 values: the stub cannot wrap it
        later = fb.make_input("C", np.zeros(2048, np.float32), arena=True)
        reqs = [codec.RequestDesc(1, inputs=[good]), codec.RequestDesc(2, inputs=[bad, later])]
        fb.sync.send(MessageKind.EXECUTE, codec.encode_execute(reqs), 4)
        result = codec.decode_result(fb.sync.recv().body)
        assert "do not hold shape [5]" in result.error[1]
        assert wait_until(lambda: fb.arena.used_bytes == 0), fb.arena.used_bytes
        fb.finalize()


RAISE_ON_B = textwrap.dedent(
    """
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            if requests[0].inputs()[0].name() == "B":
                raise pb_utils.TritonModelException("no B here")
            return [pb_utils.InferenceResponse([pb_utils.Tensor("O", r.inputs()[0].as_numpy())])
                    for r in requests]
    """
)


def test_inputs_that_die_with_the_batch_ride_in_result(repo: Path) -> None:
    """The batch's input blocks come back in RESULT's freed trailer, with no FREE message of
    their own on sync (one sendmsg/recvmsg pair less per request); a failed batch's RESULT
    has no trailer, its inputs come back with a FREE."""
    mf = write_model(repo, "raise_on_b", RAISE_ON_B)
    with started(mf) as fb:
        a = fb.make_input("A", np.arange(2048, dtype=np.float32), arena=True)
        fb.sync.send(
            MessageKind.EXECUTE, codec.encode_execute([codec.RequestDesc(1, inputs=[a])]), 5
        )
        msg = fb.sync.recv()
        assert msg.kind == MessageKind.RESULT, msg.kind
        result = codec.decode_result(msg.body)
        assert result.error is None
        assert result.freed == [(a.seg, a.offset)]
        # The output is a view of that input: the pin (here: our reference) keeps it readable.
        (kind, _, resp) = result.items[0]
        out = resp.outputs[0]
        assert (out.location, out.seg, out.offset) == (Location.BACKEND_ARENA, a.seg, a.offset)
        fb._free_blocks(result.freed)
        assert fb.arena.used_bytes == 0

        b = fb.make_input("B", np.zeros(2048, np.float32), arena=True)
        fb.sync.send(
            MessageKind.EXECUTE, codec.encode_execute([codec.RequestDesc(2, inputs=[b])]), 6
        )
        result = codec.decode_result(fb.sync.recv().body)
        assert "no B here" in result.error[1] and result.freed == []
        assert wait_until(lambda: fb.arena.used_bytes == 0), fb.arena.used_bytes
        fb.finalize()


FRESH = textwrap.dedent(
    """
    import numpy as np
    import triton_python_backend_utils as pb_utils

    class TritonPythonModel:
        def execute(self, requests):
            # A new 64 KiB output: above the inline threshold, so it goes in the stub arena.
            return [pb_utils.InferenceResponse([pb_utils.Tensor("O", np.ones(16384, np.float32))])
                    for r in requests]
    """
)


def _fresh_output_block(fb, token: int, freed: list) -> tuple:
    """Runs one batch whose EXECUTE hands back ``freed``; the (seg, offset) of its output."""
    x = codec.TensorDesc("X", 11, Location.INLINE, (1,), 4, data=b"\0\0\0\0")
    body = codec.encode_execute([codec.RequestDesc(token, inputs=[x])], freed)
    fb.sync.send(MessageKind.EXECUTE, body, token)
    result = codec.decode_result(fb.sync.recv().body)
    out = result.items[0][2].outputs[0]
    assert out.location == Location.STUB_ARENA
    return out.seg, out.offset


def test_stub_blocks_freed_by_an_execute_trailer(repo: Path) -> None:
    """The stub blocks the backend hands back in EXECUTE's trailer are free for that batch's
    own outputs: a new 64 KiB output lands in the block the previous one used. Without the
    trailer the block is still held and the next output goes elsewhere."""
    mf = write_model(repo, "fresh", FRESH)
    with started(mf) as fb:
        first = _fresh_output_block(fb, 1, [])
        kept = _fresh_output_block(fb, 2, [])  # first not handed back: another block
        assert kept != first
        assert _fresh_output_block(fb, 3, [first, kept]) == first
        fb.finalize()
