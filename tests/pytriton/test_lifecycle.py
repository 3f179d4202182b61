"""Errors, fatal errors, several instances, unbinding, and the ends of either process:
Ctrl-C, the user's process killed, tritonserver killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from integration_support.pytriton_helpers import loopback_config, urls, wait_for_line
from pybackend.pytriton.client import (
    FuturesModelClient,
    ModelClient,
    PyTritonClientInferenceServerError,
)
from pybackend.pytriton.exceptions import PyTritonRuntimeError, PyTritonUnrecoverableError
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import (
    Triton,
    TritonLifecyclePolicy,
    VertextAILifecyclePolicy,
)
from pybackend.server.processes import alive

EXAMPLE = Path(__file__).parent / "examples" / "add_sub_server.py"
SMOKE = Path(__file__).parent / "examples" / "smoke.py"
IO = {
    "inputs": [Tensor(name="x", dtype=np.float32, shape=(-1,))],
    "outputs": [Tensor(name="y", dtype=np.float32, shape=(-1,))],
}


def _raises(requests):
    raise KeyError("no such thing in the lookup table")


def _not_a_list(requests):
    return {"y": requests[0]["x"]}


def test_exception_is_an_error_response_with_traceback(triton: Triton) -> None:
    triton.bind("Raises", _raises, **IO)  # type: ignore[arg-type]
    triton.bind("NotAList", _not_a_list, **IO)  # type: ignore[arg-type]
    triton.run()
    x = np.ones(3, np.float32)
    with ModelClient(urls(triton)[0], "Raises") as client:
        with pytest.raises(PyTritonClientInferenceServerError) as info:
            client.infer_sample(x)
    text = str(info.value)
    assert "KeyError: 'no such thing in the lookup table'" in text
    assert "test_lifecycle.py" in text and "_raises" in text  # the callable's frame
    with ModelClient(urls(triton)[0], "NotAList") as client:
        with pytest.raises(PyTritonClientInferenceServerError, match="must be list of response"):
            client.infer_sample(x)
        # The instance keeps serving after an error.
        with pytest.raises(PyTritonClientInferenceServerError, match="must be list of response"):
            client.infer_sample(x)


def test_outputs_are_cast_to_their_configured_type(triton: Triton) -> None:
    triton.bind(
        "AsFloat64", lambda requests: [{"y": r["x"].astype(np.float64) / 3} for r in requests], **IO
    )  # type: ignore[arg-type]
    triton.run()
    with ModelClient(urls(triton)[0], "AsFloat64") as client:
        y = client.infer_sample(np.ones(2, np.float32))["y"]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, np.float32(1 / 3))


def test_unrecoverable_error_answers_then_stops_the_server(triton: Triton) -> None:
    def fatal(requests):
        raise PyTritonUnrecoverableError("the GPU fell off the bus")

    triton.bind("Fatal", fatal, **IO)  # type: ignore[arg-type]
    triton.run()
    server = triton.server
    assert server is not None
    errors: list = []

    def call() -> None:
        with ModelClient(urls(triton)[0], "Fatal") as client:
            try:
                client.infer_sample(np.ones(2, np.float32))
            except PyTritonClientInferenceServerError as e:
                errors.append(str(e))

    caller = threading.Thread(target=call)
    caller.start()
    triton.serve()  # returns (without an error) once the fatal error has stopped everything
    caller.join(60)
    assert errors and "the GPU fell off the bus" in errors[0]
    assert not server.is_alive()


def test_several_callables_are_several_instances(triton: Triton) -> None:
    seen: set = set()

    def make(tag: str):
        def infer(requests):
            seen.add((tag, threading.current_thread().name))
            time.sleep(0.3)  # both instances get a request while the other is busy
            return [{"y": r["x"]} for r in requests]

        return infer

    triton.bind("Two", [make("a"), make("b")], **IO, config=ModelConfig(batching=False))  # type: ignore[arg-type]
    triton.run()
    with FuturesModelClient(urls(triton)[0], "Two") as client:
        futures = [client.infer_sample(np.full(2, i, np.float32)) for i in range(4)]
        results = [f.result(60) for f in futures]
    assert [float(r["y"][0]) for r in results] == [0.0, 1.0, 2.0, 3.0]
    assert {tag for tag, _ in seen} == {"a", "b"}
    assert len({thread for _, thread in seen}) == 2


def test_unbind_while_serving(triton: Triton) -> None:
    def identity(requests):
        return [{"y": r["x"]} for r in requests]

    triton.bind("Kept", identity, **IO)  # type: ignore[arg-type]
    triton.bind("Dropped", identity, **IO)  # type: ignore[arg-type]
    triton.run()
    x = np.ones(2, np.float32)
    triton.unbind("Dropped")
    with ModelClient(urls(triton)[0], "Dropped", init_timeout_s=1) as client:
        with pytest.raises(Exception):  # noqa: B017 - not ready: a timeout, or the server's 400
            client.infer_sample(x)
    with ModelClient(urls(triton)[0], "Kept") as client:
        np.testing.assert_array_equal(client.infer_sample(x)["y"], x)
    triton.bind("Dropped", identity, **IO)  # type: ignore[arg-type]
    with ModelClient(urls(triton)[0], "Dropped") as client:
        np.testing.assert_array_equal(client.infer_sample(x)["y"], x)


def test_tritonserver_death_ends_serve_with_an_error(triton: Triton) -> None:
    triton.bind("Any", lambda requests: [{"y": r["x"]} for r in requests], **IO)  # type: ignore[arg-type]
    triton.run()
    server = triton.server
    assert server is not None
    threading.Timer(0.5, os.kill, (server.pid, signal.SIGKILL)).start()
    with pytest.raises(PyTritonRuntimeError, match="tritonserver exited unexpectedly"):
        triton.serve(monitoring_period_s=0.2)


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _start_example(extra_env: dict) -> tuple[subprocess.Popen, str]:
    config = loopback_config()
    # PYTHONFAULTHANDLER: a process that hangs is sent SIGABRT and prints every thread's stack.
    env = dict(os.environ, PYTHONFAULTHANDLER="1", **extra_env)
    for field in ("http_address", "grpc_address", "metrics_address", "http_port", "grpc_port"):
        env[f"PYTRITON_TRITON_CONFIG_{field.upper()}"] = str(getattr(config, field))
    env["PYTRITON_TRITON_CONFIG_METRICS_PORT"] = str(config.metrics_port)
    proc = subprocess.Popen(
        [sys.executable, str(EXAMPLE)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        # SIGINT as a terminal's Ctrl-C finds it: a run started in the background (`cmd &`)
        # inherits it ignored, and the script would then never see Ctrl-C.
        preexec_fn=_default_sigint,
    )
    printed = wait_for_line(proc, "SERVING")
    if printed is not None:
        proc.wait(30)
        pytest.fail("the example did not start:\n" + printed)
    return proc, f"http://127.0.0.1:{config.http_port}"


def _exit_code_or_stacks(proc: subprocess.Popen, timeout: float) -> int:
    """proc's exit code; a failure with its output and its threads' stacks if it hangs."""
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        pytest.fail(f"no exit {timeout:g} s after the signal; its output and stacks:\n{out}")


def _tritonservers_of(pid: int) -> list:
    out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def test_example_script_serves_until_ctrl_c() -> None:
    proc, url = _start_example({})
    children = _tritonservers_of(proc.pid)
    try:
        a = np.ones((2, 3), np.float32)
        with ModelClient(url, "AddSub") as client:
            np.testing.assert_allclose(client.infer_batch(a, a)["add"], a * 2)
        proc.send_signal(signal.SIGINT)
        assert _exit_code_or_stacks(proc, 60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
    assert children and not any(alive(c) for c in children)


def test_user_process_killed_fails_requests_at_once_and_leaves_nothing() -> None:
    proc, url = _start_example({"SLOW_S": "30"})
    children = _tritonservers_of(proc.pid)
    errors: list = []

    def call() -> None:
        a = np.ones((1, 3), np.float32)
        with ModelClient(url, "AddSub", inference_timeout_s=60) as client:
            try:
                client.infer_batch(a, a)
            except Exception as e:  # noqa: BLE001 - the error text is what is checked
                errors.append(f"{type(e).__name__}: {e}")

    caller = threading.Thread(target=call)
    caller.start()
    time.sleep(1.0)  # the request is inside the 30 s callable now
    started = time.monotonic()
    proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()
    caller.join(60)
    assert time.monotonic() - started < 25, "the request waited for the dead callable"
    assert errors, "the request did not fail"
    deadline = time.monotonic() + 30
    while any(alive(c) for c in children) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children and not any(alive(c) for c in children), "tritonserver outlived its user"


def test_smoke_script() -> None:
    """The script `make test-pytriton-numpy1` runs under numpy 1, here under this numpy."""
    done = subprocess.run([sys.executable, str(SMOKE)], capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stdout + done.stderr


def test_requests_carry_parameters_and_requested_output_names(triton: Triton) -> None:
    import tritonclient.http as httpclient

    seen: list = []

    def two_outputs(requests):
        seen.extend((r.parameters, r.requested_output_names) for r in requests)
        return [{"y": r["x"], "z": r["x"] * 2} for r in requests]

    triton.bind(
        "TwoOutputs",
        two_outputs,
        inputs=IO["inputs"],
        outputs=[*IO["outputs"], Tensor(name="z", dtype=np.float32, shape=(-1,))],
    )
    triton.run()
    server = triton.server
    assert server is not None
    client = httpclient.InferenceServerClient(server.http_url)
    x = np.ones((1, 2), np.float32)
    item = httpclient.InferInput("x", list(x.shape), "FP32")
    item.set_data_from_numpy(x)
    result = client.infer(
        "TwoOutputs",
        [item],
        outputs=[httpclient.InferRequestedOutput("z")],
        parameters={"mode": "fast", "n": 3},
    )
    client.close()
    assert seen == [({"mode": "fast", "n": 3}, ["z"])]
    np.testing.assert_array_equal(result.as_numpy("z"), x * 2)
    assert result.as_numpy("y") is None  # not requested: not sent


def test_lifecycle_policy_without_launch_on_startup_starts_at_run() -> None:
    """PyTriton's TritonLifecyclePolicy (importable from pybackend.pytriton.triton as from
    pytriton.triton): with launch_triton_on_startup=False the context manager starts
    nothing; run() starts the server with what was bound by then."""
    assert TritonLifecyclePolicy().launch_triton_on_startup
    with Triton(
        config=loopback_config(), triton_lifecycle_policy=VertextAILifecyclePolicy
    ) as triton:
        assert triton.server is None
        triton.bind("Late", lambda requests: [{"y": r["x"]} for r in requests], **IO)
        triton.run()
        with ModelClient(urls(triton)[0], "Late") as client:
            y = client.infer_sample(np.ones(2, np.float32))["y"]
    np.testing.assert_array_equal(y, np.ones(2, np.float32))
