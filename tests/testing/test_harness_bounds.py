"""The in-process engine bounds ``infer_stream`` as a stub process does: its timeout counts
from the call's start (execute included), the error is the stub engine's NoFinal, the request
is cancelled, and an execute that runs on is named in a warning while the harness refuses new
requests until it returns (harness_bounds.py). Each test has a pytest-timeout: a regression
fails instead of hanging the suite."""

from __future__ import annotations

import threading
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import pytest
from model_dirs import how, write_model

from pybackend.testing import ExecuteStillRunningWarning, InferError, ModelHarness, StubModel
from pybackend.testing.harness_errors import NoFinal
from pybackend.utils.errors import TritonModelException

CONFIG = """name: "{name}"
backend: "python"
model_transaction_policy {{ decoupled: true }}
input [ {{ name: "HOW" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
"""

# "wait": runs until its request is cancelled (20 s at most), then answers whether it was;
# "sleep": ignores the cancel for 1.5 s; anything else answers at once.
HANGS = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            how = pb_utils.get_input_tensor_by_name(request, "HOW").as_numpy()[0].decode()
            if how == "wait":
                end = time.monotonic() + 20
                while not request.is_cancelled() and time.monotonic() < end:
                    time.sleep(0.01)
            elif how == "sleep":
                time.sleep(1.5)
            out = np.array([int(request.is_cancelled())], np.int32)
            sender = request.get_response_sender()
            sender.send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""

# Answers from its coroutine after a delay: a stub process runs it on its event loop, so
# the caller's timeout runs meanwhile.
ASYNC_LATE = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(1.0)
        for request in requests:
            out = np.array([int(request.is_cancelled())], np.int32)
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""

NO_FINAL = "no FINAL from the response sender of '{name}' within 0.3 s (0 responses so far)"


def _thread_ends(prefix: str) -> None:
    """Waits (10 s at most) until no thread named ``prefix``... runs."""
    end = time.monotonic() + 10
    while any(t.name.startswith(prefix) for t in threading.enumerate()):
        assert time.monotonic() < end, f"thread {prefix}... still runs"
        time.sleep(0.02)


@pytest.mark.timeout(30)
def test_an_execute_that_waits_for_its_cancel_times_out_is_cancelled_and_stops(
    tmp_path: Path,
) -> None:
    model_dir = write_model(tmp_path, "waits", HANGS, CONFIG.format(name="waits"))
    with ModelHarness(model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning, match="daemon thread 'waits_0'"):
            with pytest.raises(NoFinal) as err:
                model.infer_stream(how("wait"), timeout=0.3)
        assert err.value.message == NO_FINAL.format(name="waits")
        _thread_ends("harness-execute-waits")  # it saw the cancel and returned
        got = model.infer_stream(how("now"), timeout=10)  # usable again, not cancelled
        assert [r["OUT"].tolist() for r in got] == [[0]]


@pytest.mark.timeout(30)
def test_while_an_abandoned_execute_runs_new_requests_are_refused(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "sleeps", HANGS, CONFIG.format(name="sleeps"))
    with ModelHarness(model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning):
            with pytest.raises(NoFinal):
                model.infer_stream(how("sleep"), timeout=0.3)
        with pytest.raises(TritonModelException, match="still runs in thread 'sleeps_0'"):
            model.infer_stream(how("now"), timeout=10)
        assert model.execute_still_running == "sleeps_0"  # the instance's thread
        _thread_ends("harness-execute-sleeps")
        assert model.execute_still_running is None
        got = model.infer_stream(how("now"), timeout=10)
        assert [r["OUT"].tolist() for r in got] == [[0]]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_late_coroutine_times_out_in_every_offline_engine(tmp_path: Path, kind: Any) -> None:
    model_dir = write_model(tmp_path, "late", ASYNC_LATE, CONFIG.format(name="late"))
    # In-process the coroutine holds the harness's one execute, so it runs on, named in a
    # warning; a stub process has handed it to its event loop already.
    warns = pytest.warns(ExecuteStillRunningWarning) if kind is ModelHarness else nullcontext()
    with kind(model_dir) as model:
        with warns, pytest.raises(InferError) as err:
            model.infer_stream(how("x"), timeout=0.3)
        assert isinstance(err.value, NoFinal)
        assert err.value.message == NO_FINAL.format(name="late")
        _thread_ends("harness-execute-late")


@pytest.mark.timeout(30)
def test_a_live_stream_is_bounded_from_its_start(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "live", HANGS, CONFIG.format(name="live"))
    got: list[Any] = []
    with ModelHarness(model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning):
            with pytest.raises(NoFinal):
                model.infer_stream(how("wait"), timeout=0.3, on_response=got.append)
        _thread_ends("harness-execute-live")
    # The model answered after the timeout, seeing its cancel; the caller had stopped.
    assert [r["OUT"].tolist() for r in got] in ([], [[1]])


# Its sender answers from a thread once the request is cancelled (20 s at most), and logs it.
WAITS_FOR_CANCEL = """
import threading
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            threading.Thread(target=self._answer, args=(request,), daemon=True).start()
        return None

    def _answer(self, request):
        end = time.monotonic() + 20
        while not request.is_cancelled() and time.monotonic() < end:
            time.sleep(0.01)
        pb_utils.Logger.log_info(f"cancelled: {request.is_cancelled()}")
        request.get_response_sender().send(
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        )
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_stream_that_times_out_is_cancelled_in_every_offline_engine(
    tmp_path: Path, kind: Any
) -> None:
    """As the server engine's client cancels it: the model's is_cancelled() turns true."""
    model_dir = write_model(tmp_path, "cancels", WAITS_FOR_CANCEL, CONFIG.format(name="cancels"))
    with kind(model_dir) as model:
        with pytest.raises(NoFinal):
            model.infer_stream(how("x"), timeout=0.3)
        end = time.monotonic() + 20
        while not any(r.message.startswith("cancelled:") for r in model.logs):
            assert time.monotonic() < end, "the model never logged"
            time.sleep(0.02)
        assert [r.message for r in model.logs if r.message.startswith("cancelled:")] == [
            "cancelled: True"
        ]


# A synchronous execute that answers, FINAL included, only after 1 s.
SLOW_SYNC = """
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        time.sleep(1.0)
        for request in requests:
            out = np.array([int(request.is_cancelled())], np.int32)
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
@pytest.mark.parametrize("live", [False, True])
def test_the_timeout_counts_from_the_call_in_every_offline_engine(
    tmp_path: Path, kind: Any, live: bool
) -> None:
    """An answer that comes after the timeout, even from inside execute, is too late: the
    call gives up then, the execute runs on (a StubModel's stub is not killed)."""
    model_dir = write_model(tmp_path, "slow", SLOW_SYNC, CONFIG.format(name="slow"))
    got: list[Any] = []
    with kind(model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning), pytest.raises(NoFinal) as err:
            model.infer_stream(how("x"), timeout=0.3, on_response=got.append if live else None)
        assert err.value.message.startswith(
            "no FINAL from the response sender of 'slow' within 0.3 s"
        )
        _thread_ends("harness-execute-slow")
        got.clear()
        answers = model.infer_stream(how("x"), timeout=10)  # the next request is answered
        assert [r["OUT"].tolist() for r in answers] == [[0]]


# Its finalize runs until the file RELEASE exists (20 s at most).
HANGS_IN_FINALIZE = """
import os
import time
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]

    def finalize(self):
        end = time.monotonic() + 20
        while not os.path.exists({release!r}) and time.monotonic() < end:
            time.sleep(0.01)
"""


@pytest.mark.timeout(60)
def test_closing_never_waits_for_a_finalize_longer_than_a_stub_model_does(tmp_path: Path) -> None:
    release = tmp_path / "release"
    body = HANGS_IN_FINALIZE.format(release=str(release))
    model = ModelHarness(write_model(tmp_path, "stuck", body)).start()
    with pytest.warns(ExecuteStillRunningWarning, match="daemon thread 'stuck_0'"):
        model.close()
    release.touch()
    _thread_ends("harness-finalize-stuck")
