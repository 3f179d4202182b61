"""No wait of the harness is unbounded: ``infer``, ``infer_batch`` and ``execute`` give up
after their ``timeout`` in every engine that takes them (NoResponse, the execute left named
in an ExecuteStillRunningWarning offline, new requests refused until it returns), a
StubModel's synchronous execute that never returns included; a load is bounded by
``initialize_timeout`` in both offline engines; and ``infer()`` of a decoupled model is
refused as tritonserver refuses it. The models block until the test releases them (a file
the teardown creates), so nothing here depends on how long something takes."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Iterator

import pytest
from model_dirs import how, write_model

from pybackend.testing import (
    ExecuteStillRunningWarning,
    InferError,
    ModelHarness,
    ServerModel,
    StubModel,
)
from pybackend.testing.harness_errors import DECOUPLED_ON_HTTP, NoFinal, NoResponse
from pybackend.testing.stub_driver import PACKAGE_ROOT
from pybackend.utils.errors import ErrorCode, TritonModelException

KINDS = {"inprocess": ModelHarness, "stub": StubModel, "server": ServerModel}
OFFLINE = ["inprocess", "stub"]

CONFIG = """name: "{name}"
backend: "python"
{extra}
input [ {{ name: "HOW" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] }} ]
"""

# "wait": blocks until the file RELEASE exists (20 s at most), then logs whether its request
# was cancelled meanwhile; anything else answers at once.
BLOCKS = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils

RELEASE = {release!r}


def released():
    end = time.monotonic() + 20
    while not os.path.exists(RELEASE) and time.monotonic() < end:
        time.sleep(0.01)


class TritonPythonModel:
    def execute(self, requests):
        how = pb_utils.get_input_tensor_by_name(requests[0], "HOW").as_numpy()[0].decode()
        if how == "wait":
            released()
            for request in requests:
                pb_utils.Logger.log_info(f"cancelled: {{request.is_cancelled()}}")
        out = np.array([0], np.int32)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""


@pytest.fixture
def release(tmp_path: Path) -> Iterator[Path]:
    """The file that lets the model go on; created at teardown whatever happened."""
    path = tmp_path / "release"
    yield path
    path.touch()


def _thread_ends(prefix: str) -> None:
    """Waits (20 s at most) until no thread named ``prefix``... runs."""
    end = time.monotonic() + 20
    while any(t.name.startswith(prefix) for t in threading.enumerate()):
        assert time.monotonic() < end, f"thread {prefix}... still runs"
        time.sleep(0.02)


def _logged_cancelled(model: Any) -> list[str]:
    """What the model logged about its requests' cancel, once it logged (20 s at most)."""
    end = time.monotonic() + 20
    while True:
        got = [r.message for r in model.logs if r.message.startswith("cancelled:")]
        if got or time.monotonic() > end:
            return got
        time.sleep(0.02)


def _no_response(model: str, instance: str, call: str) -> str:
    return (
        f"no response from model '{model}' (instance '{instance}') within timeout=0.3 s of "
        f"{call}(): its execute did not return by then; "
    )


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    "mode, call",
    # execute() (InferenceResponse objects) is the in-process engine's call.
    [(m, c) for m in OFFLINE for c in ("infer", "infer_batch")] + [("inprocess", "execute")],
)
def test_a_call_gives_up_on_an_execute_that_does_not_return(
    tmp_path: Path, release: Path, mode: str, call: str
) -> None:
    body = BLOCKS.format(release=str(release))
    model_dir = write_model(tmp_path, "blocks", body, CONFIG.format(name="blocks", extra=""))
    # In-process execute runs on the instance's thread; a StubModel's call waits for the
    # stub's RESULT on a worker thread of its own.
    where = "harness-execute-" if mode == "stub" else "blocks_0'"
    with KINDS[mode](model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning, match=f"daemon thread '{where}"):
            if call == "infer_batch":  # every request of the batch gets the error
                got = model.infer_batch([how("wait"), how("wait")], timeout=0.3)
                assert got[0] is got[1]
                error = got[0]
            else:
                with pytest.raises(NoResponse) as err:
                    getattr(model, call)(
                        how("wait") if call == "infer" else [how("wait")], timeout=0.3
                    )
                error = err.value
        assert isinstance(error, NoResponse)
        assert error.message.startswith(_no_response("blocks", "blocks_0", call))
        assert "pass a larger timeout=" in error.message
        # It runs on: the harness refuses to queue a request behind it, naming it.
        with pytest.raises(TritonModelException, match=f"still runs in thread '{where}"):
            model.infer(how("now"), timeout=30)
        release.touch()
        _thread_ends("harness-execute-blocks")
        # The model saw its requests cancelled, as a client's stopped wait cancels them.
        assert set(_logged_cancelled(model)) == {"cancelled: True"}
        assert model.infer(how("now"), timeout=30)["OUT"].tolist() == [0]


@pytest.mark.timeout(180)
def test_the_server_engine_takes_the_timeout_as_the_offline_ones(
    tmp_path: Path, release: Path
) -> None:
    # Seconds the client waits (not tritonclient's server-side timeout in microseconds).
    body = BLOCKS.format(release=str(release))
    model_dir = write_model(tmp_path, "blocks", body, CONFIG.format(name="blocks", extra=""))
    with ServerModel(model_dir) as model:
        with pytest.raises(NoResponse) as err:
            model.infer(how("wait"), timeout=0.3)
        assert err.value.message.startswith(
            "no response from model 'blocks' within timeout=0.3 s of infer(): its execute "
            "did not return by then; the client stopped waiting"
        )
        (got,) = model.infer_batch([how("wait")], timeout=0.3)
        assert isinstance(got, NoResponse)
        release.touch()
        assert model.infer(how("now"), timeout=30)["OUT"].tolist() == [0]


DECOUPLED_BLOCKS = """
import os
import time
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        end = time.monotonic() + 20
        while not os.path.exists({release!r}) and time.monotonic() < end:
            time.sleep(0.01)
        for request in requests:
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], np.int32))]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", OFFLINE)
def test_a_stub_model_stream_gives_up_on_a_sync_execute_that_does_not_return(
    tmp_path: Path, release: Path, mode: str
) -> None:
    """A StubModel's wait for RESULT is the call's (it waited for as long as execute ran)."""
    config = CONFIG.format(name="hangs", extra="model_transaction_policy { decoupled: true }")
    model_dir = write_model(
        tmp_path, "hangs", DECOUPLED_BLOCKS.format(release=str(release)), config
    )
    with KINDS[mode](model_dir) as model:
        with pytest.warns(ExecuteStillRunningWarning), pytest.raises(NoFinal) as err:
            model.infer_stream(how("x"), timeout=0.3)
        assert err.value.message == (
            "no FINAL from the response sender of 'hangs' within 0.3 s (0 responses so far)"
        )
        release.touch()
        _thread_ends("harness-execute-hangs")
        assert [r["OUT"].tolist() for r in model.infer_stream(how("x"), timeout=30)] == [[0]]


@pytest.mark.timeout(120)
def test_the_lower_level_stream_is_bounded_from_its_start(tmp_path: Path, release: Path) -> None:
    config = CONFIG.format(name="hangs", extra="model_transaction_policy { decoupled: true }")
    body = DECOUPLED_BLOCKS.format(release=str(release))
    with ModelHarness(write_model(tmp_path, "hangs", body, config)) as model:
        with pytest.warns(ExecuteStillRunningWarning), pytest.raises(NoFinal):
            model.stream(model.request(how("x")), timeout=0.3)
        release.touch()
        _thread_ends("harness-execute-hangs")
        assert len(model.stream(how("x"), timeout=30)) == 1


# initialize (or auto_complete_config) blocks until RELEASE exists (20 s at most).
SLOW_LOAD = """
import os
import time
import triton_python_backend_utils as pb_utils


def released():
    end = time.monotonic() + 20
    while not os.path.exists({release!r}) and time.monotonic() < end:
        time.sleep(0.01)


class TritonPythonModel:
    {auto}
    def initialize(self, args):
        released()

    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""

AUTO = """@staticmethod
    def auto_complete_config(config):
        released()
        return config
"""


@pytest.mark.timeout(120)
@pytest.mark.parametrize("mode", OFFLINE)
@pytest.mark.parametrize("phase", ["initialize", "auto_complete_config"])
def test_a_load_is_bounded_by_initialize_timeout(
    tmp_path: Path, release: Path, mode: str, phase: str
) -> None:
    body = SLOW_LOAD.format(release=str(release), auto=AUTO if phase != "initialize" else "")
    model = KINDS[mode](write_model(tmp_path, "loads", body), initialize_timeout=0.5)
    try:
        with pytest.raises(TritonModelException) as err:
            model.start()
    finally:
        model.close()  # nothing left to close when start failed, as it must
    text = str(err.value)
    assert text.startswith(
        f"{phase} of model 'loads' (instance 'loads_0') did not return within "
        "initialize_timeout=0.5 s: the load failed"
    )
    assert "pass a larger initialize_timeout=" in text
    assert ("the stub was killed" if mode == "stub" else "daemon thread 'loads_0'") in text
    release.touch()
    _thread_ends(f"harness-{phase}-loads")


ONE_RESPONSE = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            request.get_response_sender().send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([7], np.int32))]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
"""


@pytest.mark.timeout(180)
@pytest.mark.parametrize("mode", list(KINDS))
def test_infer_of_a_decoupled_model_that_sends_one_response_is_refused(
    tmp_path: Path, mode: str
) -> None:
    """tritonserver 2.51 refuses it (HTTP 501, unary gRPC UNIMPLEMENTED): every engine
    does, so a test that passes offline passes through the server; infer_stream answers."""
    config = CONFIG.format(name="single", extra="model_transaction_policy { decoupled: true }")
    with KINDS[mode](write_model(tmp_path, "single", ONE_RESPONSE, config)) as model:
        with pytest.raises(InferError) as err:
            model.infer(how("x"))
        assert err.value.code == ErrorCode.UNSUPPORTED
        assert err.value.message.startswith(DECOUPLED_ON_HTTP)
        if mode != "server":
            assert "model 'single' is decoupled" in err.value.message
            assert "use infer_stream()" in err.value.message
        assert [r["OUT"].tolist() for r in model.infer_stream(how("x"))] == [[7]]
    if mode != "server":  # refused before anything ran, as the server counts nothing
        assert model.statistics.snapshot()["inference_count"] == 1


# Logs the thread its initialize and execute run on.
THREADS = """
import threading
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info(f"initialize: {threading.current_thread().name}")

    def execute(self, requests):
        pb_utils.Logger.log_info(f"execute: {threading.current_thread().name}")
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""


@pytest.mark.parametrize("debug", ["", "pdb"])
def test_in_a_debug_mode_in_process_calls_are_not_bounded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, debug: str
) -> None:
    """As the backend's debug mode has no timeouts: the model runs on the caller's thread,
    so a breakpoint stops it as long as the developer takes (no worker to give up on)."""
    monkeypatch.setenv("PYBACKEND_DEBUG", debug)
    with ModelHarness(write_model(tmp_path, "threads", THREADS)) as model:
        model.infer({}, timeout=0.3)
        logged = [r.message for r in model.logs]
    me = threading.current_thread().name
    if debug:
        assert logged == [f"initialize: {me}", f"execute: {me}"]
    else:
        # The instance's own thread, for all its code, as a stub's main thread.
        assert logged == ["initialize: threads_0", "execute: threads_0"]


@pytest.mark.timeout(120)
def test_a_stub_that_never_says_hello_is_killed_past_initialize_timeout(
    tmp_path: Path, release: Path
) -> None:
    """As the backend bounds a stub's start (HELLO) by stub-timeout-seconds: here a
    sitecustomize on the stub's path blocks its interpreter's start until the release."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import os, time\n"
        "end = time.monotonic() + 20\n"
        f"while not os.path.exists({str(release)!r}) and time.monotonic() < end:\n"
        "    time.sleep(0.01)\n"
    )
    body = "class TritonPythonModel:\n    def execute(self, requests):\n        return []\n"
    path = f"{site}:{PACKAGE_ROOT}"
    model = StubModel(
        write_model(tmp_path, "mute", body), env={"PYTHONPATH": path}, initialize_timeout=0.5
    )
    try:
        with pytest.raises(TritonModelException) as err:
            model.start()
    finally:
        model.close()
    assert str(err.value).startswith(
        "the start of model 'mute' (instance 'mute_0') did not return within "
        "initialize_timeout=0.5 s: the load failed"
    )
    assert "the stub was killed: no HELLO" in str(err.value)
