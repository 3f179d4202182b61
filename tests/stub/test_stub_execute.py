"""Batches through ``python -m pybackend.stub`` (a real child process, driven by a Python
fake backend): inputs, outputs, return-value rules, senders, async execute."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fake_backend import FakeBackend, started, wait_until, write_model  # noqa: E402

from pybackend.ipc.protocol import Location  # noqa: E402


def test_inputs_are_zero_copy_writable_and_blocks_come_back(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    x = r.inputs()[0].as_numpy()
                    assert x.flags.writeable
                    x *= 2  # in place, in shared memory
                    out.append(pb_utils.InferenceResponse([
                        pb_utils.Tensor("SAME", x),
                        pb_utils.Tensor("COPY", x + 1),
                        pb_utils.Tensor("SMALL", x[:2].copy()),
                    ]))
                return out
        """
    )
    mf = write_model(repo, "zc", src)
    with started(mf) as fb:
        x = np.arange(4096, dtype=np.int32)
        res = fb.execute([{"X": x}], arena=True)
        (item,) = res["items"]
        assert item["where"] == {
            "SAME": Location.BACKEND_ARENA,
            "COPY": Location.STUB_ARENA,
            "SMALL": Location.INLINE,
        }
        np.testing.assert_array_equal(item["outputs"]["SAME"], x * 2)
        np.testing.assert_array_equal(item["outputs"]["COPY"], x * 2 + 1)
        # The next sync message releases what the RESULT referenced; then the input block
        # comes back with FREE on async, and our FREE of the stub block lets it reuse it.
        fb.execute([{"X": np.zeros(1, np.int32)}], arena=False)
        assert wait_until(lambda: fb.arena.used_bytes == 0), fb.arena.used_bytes
        fb.finalize()


def test_inputs_that_die_with_the_batch_come_back_before_result(repo: Path) -> None:
    """An output that is a view of an input needs no keepalive: the backend pins the batch's
    input blocks, so the stub returns them on sync just before RESULT. An input the model
    keeps stays allocated until the model lets go of it."""
    src = textwrap.dedent(
        """
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def initialize(self, args):
                self.kept = None

            def execute(self, requests):
                out = []
                for r in requests:
                    x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
                    keep = pb_utils.get_input_tensor_by_name(r, "KEEP").as_numpy()[0]
                    self.kept = x if keep else None
                    out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x[1:])]))
                return out
        """
    )
    mf = write_model(repo, "pins", src)
    with started(mf) as fb:
        x = np.arange(8192, dtype=np.float32)
        res = fb.execute([{"X": x, "KEEP": np.zeros(1, np.int32)}], arena=True)
        (item,) = res["items"]
        assert item["where"] == {"Y": Location.BACKEND_ARENA}
        np.testing.assert_array_equal(item["outputs"]["Y"], x[1:])
        # Returned with RESULT itself: no further message, no waiting for async.
        assert fb.arena.used_bytes == 0, fb.arena.used_bytes

        res = fb.execute([{"X": x, "KEEP": np.ones(1, np.int32)}], arena=True)
        np.testing.assert_array_equal(res["items"][0]["outputs"]["Y"], x[1:])
        assert fb.arena.used_bytes > 0  # the model holds the input
        fb.execute([{"X": x[:1], "KEEP": np.zeros(1, np.int32)}], arena=False)
        assert wait_until(lambda: fb.arena.used_bytes == 0), fb.arena.used_bytes
        fb.finalize()


def test_bytes_and_all_dtypes_round_trip(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                return [
                    pb_utils.InferenceResponse(
                        [pb_utils.Tensor(t.name() + "_OUT", t.as_numpy()) for t in r.inputs()]
                    )
                    for r in requests
                ]
        """
    )
    mf = write_model(repo, "echo", src)
    inputs = {
        f"T{i}": np.arange(6).reshape(2, 3).astype(t)
        for i, t in enumerate(
            [np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32]
            + [np.int64, np.float16, np.float32, np.float64]
        )
    }
    inputs["S"] = np.array([[b"a\x00b", b""], [b"\xff\xfe", "é".encode()]], dtype=object)
    inputs["SCALAR"] = np.array(3.5, np.float32)
    inputs["EMPTY"] = np.zeros((0, 4), np.float32)
    with started(mf) as fb:
        for arena in (False, True):
            (item,) = fb.execute([inputs], arena=arena)["items"]
            for name, value in inputs.items():
                got = item["outputs"][name + "_OUT"]
                assert got.shape == value.shape, name
                assert got.dtype == value.dtype, name
                np.testing.assert_array_equal(got, value)
        fb.finalize()


def test_execute_exception_fails_the_batch_with_a_traceback(repo: Path) -> None:
    src = textwrap.dedent(
        """
        def helper(x):
            raise ValueError(f"bad input {x}")

        class TritonPythonModel:
            def execute(self, requests):
                return helper(len(requests))
        """
    )
    mf = write_model(repo, "boom", src)
    with started(mf) as fb:
        res = fb.execute([{"X": np.zeros(1)}])
        code, message = res["error"]
        assert code == 1
        prefix = "Failed to process the request(s) for model 'm_0_0', message: "
        assert message.startswith(prefix + "ValueError: bad input 1\n\nAt:\n")
        frames = message.split("At:\n", 1)[1].splitlines()
        assert frames == [f"  {mf}(3): helper", f"  {mf}(7): execute"]
        wait_until(lambda: any(m.startswith(prefix) for *_, m in fb.logs))
        assert any(level == 2 and m == message for level, _, _, m in fb.logs)
        # The stub keeps serving after a failed batch.
        assert "error" in fb.execute([{"X": np.zeros(1)}])
        fb.finalize()


@pytest.mark.parametrize(
    ("ret", "expected"),
    [
        ("(None,)", "Expected a list in the execute return, found type '<class 'tuple'>'."),
        (
            "[]",
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0\n",
        ),
        (
            "[1]",
            "Expected an 'InferenceResponse' object in the execute function return list, "
            "found type '<class 'int'>'.",
        ),
    ],
)
def test_return_validation_messages(repo: Path, ret: str, expected: str) -> None:
    src = f"class TritonPythonModel:\n    def execute(self, requests):\n        return {ret}\n"
    mf = write_model(repo, "bad", src)
    with started(mf) as fb:
        code, message = fb.execute([{"X": np.zeros(1)}])["error"]
        assert message == f"Failed to process the request(s) for model 'm_0_0', message: {expected}"
        fb.finalize()


def test_none_return_and_response_sender(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                for r in requests:
                    s = r.get_response_sender()
                    s.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.ones(3))]),
                           flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    try:
                        s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    except pb_utils.TritonModelException as e:
                        pb_utils.Logger.log_warn(str(e))
                return None
        """
    )
    mf = write_model(repo, "sender", src)
    with started(mf) as fb:
        res = fb.execute([{"X": np.zeros(1)}], request_kwargs=[{"token": 77}])
        assert res["items"] == [{"none": True, "release_flags": 1}]
        # async_seq made the SEND visible before RESULT was handled
        ((token, flags, resp),) = fb.sends
        assert (token, flags) == (77, 1)
        np.testing.assert_array_equal(resp["outputs"]["Y"], np.ones(3))
        assert any(
            m == "Unable to send response. Response sender has been closed." for *_, m in fb.logs
        )
        fb.finalize()


def test_decoupled_and_async_execute(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import asyncio
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            async def execute(self, requests):
                await asyncio.sleep(0.01)
                for r in requests:
                    s = r.get_response_sender()
                    for i in range(3):
                        s.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i]))]))
                    s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        """
    )
    mf = write_model(repo, "dec", src)
    with started(mf, decoupled=True) as fb:
        res = fb.execute([{"X": np.zeros(1)}], request_kwargs=[{"token": 5}])
        assert res["items"] == [{"none": True, "release_flags": 1}]
        assert wait_until(lambda: len(fb.sends) == 4)
        assert [s[1] for s in fb.sends] == [0, 0, 0, 1]
        assert [int(s[2]["outputs"]["I"][0]) for s in fb.sends[:3]] == [0, 1, 2]
        assert fb.sends[3][2] is None
        fb.finalize()


def test_async_execute_non_decoupled_and_cancellation(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            async def execute(self, requests):
                return [
                    pb_utils.InferenceResponse([pb_utils.Tensor("C", np.array([r.is_cancelled()]))])
                    for r in requests
                ]
        """
    )
    mf = write_model(repo, "asy", src)
    with FakeBackend() as fb:
        fb.hello()
        assert fb.init(mf)["is_async_execute"] is True
        fb.cancelled_tokens.add(2)
        res = fb.execute([{"X": np.zeros(1)}] * 2, request_kwargs=[{"token": 1}, {"token": 2}])
        assert [bool(i["outputs"]["C"][0]) for i in res["items"]] == [False, True]
        fb.finalize()


def test_requested_output_filtering_and_parameters(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import json
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                out = []
                for r in requests:
                    p = json.loads(r.parameters())
                    meta = [r.request_id(), r.correlation_id(), r.flags(), r.timeout(),
                            sorted(r.requested_output_names()), r.trace().get_context()]
                    out.append(pb_utils.InferenceResponse(
                        [pb_utils.Tensor("A", np.array([json.dumps([p, meta])], dtype=object)),
                         pb_utils.Tensor("B", np.zeros(1))],
                        parameters={"seen": True, "n": 3, "s": "x"}))
                return out
        """
    )
    mf = write_model(repo, "meta", src)
    with started(mf) as fb:
        kw = {
            "request_id": "rid",
            "correlation_id": "corr",
            "flags": 1,
            "timeout_us": 99,
            "parameters": '{"k": 1.5}',
            "trace_context": '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad-01"}',
        }
        (item,) = fb.execute([{"X": np.zeros(1)}], requested=[["A"]], request_kwargs=[kw])["items"]
        assert list(item["outputs"]) == ["A"]
        p, meta = json.loads(item["outputs"]["A"][0])
        assert p == {"k": 1.5}
        assert meta == ["rid", "corr", 1, 99, ["A"], kw["trace_context"]]
        assert json.loads(item["parameters"]) == {"seen": True, "n": 3, "s": "x"}
        # A request the server does not trace (in OpenTelemetry mode) has no context.
        (item,) = fb.execute([{"X": np.zeros(1)}], requested=[["A"]])["items"]
        assert json.loads(item["outputs"]["A"][0])[1][-1] is None
        fb.finalize()


def test_missing_execute(repo: Path) -> None:
    mf = write_model(repo, "noexec", "class TritonPythonModel:\n    pass\n")
    with started(mf) as fb:
        _, message = fb.execute([{"X": np.zeros(1)}])["error"]
        assert message.endswith(f"Python model {mf} does not implement `execute` method.")
        fb.finalize()


def test_request_left_without_response_gets_an_error_item(repo: Path) -> None:
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                requests[1].get_response_sender().send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("O", np.ones(1))]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return [None, None]
        """
    )
    mf = write_model(repo, "noresp", src)
    with started(mf) as fb:
        first, second = fb.execute([{"X": np.zeros(1)}] * 2)["items"]
        code, message = first["error"]
        assert code == 1
        assert message.startswith("Failed to process the request(s) for model 'm_0_0', message: ")
        assert "None" in message
        assert second == {"none": True, "release_flags": 1}
        fb.finalize()


def test_failure_after_sends_keeps_the_order_with_those_sends(repo: Path) -> None:
    """A batch error RESULT has no async_seq; when the model already sent something on
    async, the failure comes as error responses in an OK result that carries it."""
    src = textwrap.dedent(
        """
        import numpy as np
        import triton_python_backend_utils as pb_utils

        class TritonPythonModel:
            def execute(self, requests):
                requests[0].get_response_sender().send(
                    pb_utils.InferenceResponse([pb_utils.Tensor("O", np.ones(1))]),
                    flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
                )
                return [pb_utils.InferenceResponse([]), pb_utils.InferenceResponse([])]
        """
    )
    mf = write_model(repo, "sendfail", src)
    with started(mf) as fb:
        res = fb.execute([{"X": np.zeros(1)}] * 2, request_kwargs=[{"token": 1}, {"token": 2}])
        first, second = res["items"]
        assert first == {"none": True, "release_flags": 1}
        code, message = second["error"]
        assert message == (
            "Failed to process the request(s) for model 'm_0_0', message: Unable to send "
            "response. Non-decoupled model cannot send more than one response."
        )
        assert [s[0] for s in fb.sends] == [1]  # seen before the RESULT was handled
        fb.finalize()
