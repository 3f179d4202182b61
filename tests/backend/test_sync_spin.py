"""The sync spin (csrc/backend/lane_spin.h, docs/protocol.md "The spin") through the real
server: with the spin forced on (ipc-spin-us) tiny, 64 KiB, BLS and decoupled requests are
answered correctly on both sync paths (the lane, the socket); in auto mode the decision follows
the usable cores (on this 2-vCPU machine: off, today's path), it is logged at verbose level,
and the stub is told the same value (PYBACKEND_STUB_SPIN_US in its environment); the BLS
answer's poll (ipc-bls-spin-us, PYBACKEND_STUB_BLS_SPIN_US) follows it, or its own knob.

Every server gets a fake cgroup tree (PYBACKEND_CGROUP_ROOT, as in test_thread_budget.py), so
only the affinity, or the quota a test sets, counts as the machine's cores."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import tritonclient.http as httpclient

from integration_support import EXAMPLES_REPOSITORY, example_client
from integration_support.bls_pipeline import BLS_PIPELINE_MODELS, check_bls_pipeline
from integration_support.clients import probe_answer
from integration_support.echo_model import write_echo_repository
from integration_support.fake_cgroup import fake_cgroup_root
from pybackend.server import ServerError, TritonServer

CORES = len(os.sched_getaffinity(0))  # the server inherits the test's affinity
LOG_LINE = re.compile(r"model '(\w+)': sync spin (off|\d+ us) \((.*)\)")
BLS_LINE = re.compile(r"model '(\w+)': BLS answer spin (off|\d+ us) \((.*)\)")

PROBE_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "SPIN", data_type: TYPE_STRING, dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: %d } ]
"""
PROBE_MODEL = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        seen = "/".join(
            os.environ.get(f"PYBACKEND_STUB_{what}SPIN_US", "unset") for what in ("", "BLS_")
        ).encode()
        out = np.array([seen], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SPIN", out)]) for _ in requests]
"""


def probe_repository(root: Path, instances: int) -> Path:
    (root / "spin_probe" / "1").mkdir(parents=True)
    (root / "spin_probe" / "config.pbtxt").write_text(PROBE_CONFIG % instances)
    (root / "spin_probe" / "1" / "model.py").write_text(PROBE_MODEL)
    return root


def decisions(server: TritonServer, line: re.Pattern = LOG_LINE) -> dict[str, tuple[str, str]]:
    return {m[1]: (m[2], m[3]) for m in line.finditer(server.log_text())}


def stub_spin(server: TritonServer) -> str:
    """ "<sync spin µs>/<BLS answer spin µs>" as the probe's stub sees them."""
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        return probe_answer(client, "spin_probe", "SPIN").decode()
    finally:
        client.close()


@pytest.mark.parametrize(
    ("cpu_max", "instances"),
    [("max 100000", 1), ("100000 100000", 1), ("max 100000", 4)],
    ids=["affinity", "one-cpu-quota", "four-instances"],
)
def test_auto_decides_from_the_cores_and_tells_the_stub(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cpu_max: str, instances: int
) -> None:
    root = fake_cgroup_root(tmp_path / "cg", "0::/ctr", {"ctr/cpu.max": cpu_max})
    monkeypatch.setenv("PYBACKEND_CGROUP_ROOT", str(root))
    monkeypatch.setenv("PYBACKEND_STUB_SPIN_US", "777")  # the backend's decisions override them
    monkeypatch.setenv("PYBACKEND_STUB_BLS_SPIN_US", "777")
    cores = CORES if cpu_max.startswith("max") else 1
    on = cores // instances >= 4
    repo = probe_repository(tmp_path / "models", instances)
    with TritonServer(repo, backend="ours", extra_args=["--log-verbose=1"]) as server:
        said, reason = decisions(server)["spin_probe"]
        assert said == ("100 us" if on else "off")
        assert reason.startswith(f"auto: {cores} usable cores, {instances} instance")
        assert stub_spin(server) == ("100/1000" if on else "0/0")
        bls_said, bls_reason = decisions(server, BLS_LINE)["spin_probe"]
        assert (bls_said, bls_reason) == ("1000 us" if on else "off", "auto: 10 sync spins")
    if CORES < 4:
        assert not on  # this machine takes exactly the path without a spin


@pytest.mark.parametrize("value", ["0", "auto", "250"])
def test_the_knob_overrides_the_cores(tmp_path: Path, value: str) -> None:
    repo = probe_repository(tmp_path, 1)
    with TritonServer(
        repo,
        backend="ours",
        backend_config=[f"ipc-spin-us={value}"],
        extra_args=["--log-verbose=1"],
    ) as server:
        said, reason = decisions(server)["spin_probe"]
        if value == "auto":
            assert reason.startswith("auto: ")
        else:
            assert said == ("off" if value == "0" else "250 us")
            assert reason == "set by the backend config ipc-spin-us"
            # The BLS answer's poll follows (auto): ten sync spins, off with it.
            assert stub_spin(server) == f"{value}/{int(value) * 10}"


@pytest.mark.parametrize(("spin", "bls"), [("auto", "0"), ("0", "300"), ("250", "auto")])
def test_the_bls_knob_sets_the_answers_poll_alone(tmp_path: Path, spin: str, bls: str) -> None:
    repo = probe_repository(tmp_path, 1)
    with TritonServer(
        repo,
        backend="ours",
        backend_config=[f"ipc-spin-us={spin}", f"ipc-bls-spin-us={bls}"],
        extra_args=["--log-verbose=1"],
    ) as server:
        sync_us, bls_us = stub_spin(server).split("/")
        said, reason = decisions(server, BLS_LINE)["spin_probe"]
    if bls == "auto":
        assert (sync_us, bls_us) == (spin, "2500") and reason == "auto: 10 sync spins"
    else:
        assert bls_us == bls and reason == "set by the backend config ipc-bls-spin-us"
        assert said == ("off" if bls == "0" else f"{bls} us")
        if spin != "auto":
            assert sync_us == spin


@pytest.mark.parametrize("key", ["ipc-spin-us", "ipc-bls-spin-us"])
@pytest.mark.parametrize("value", ["-2", "1000001", "soon"])
def test_a_bad_knob_is_refused(tmp_path: Path, key: str, value: str) -> None:
    repo = probe_repository(tmp_path, 1)
    server = TritonServer(repo, backend="ours", backend_config=[f"{key}={value}"])
    with pytest.raises(ServerError):  # the model cannot load: the server exits
        server.start()
    assert key in server.log_text()


@pytest.mark.parametrize("lane", ["true", "false"])
def test_forced_spin_answers_tiny_and_64k_requests(tmp_path: Path, lane: str) -> None:
    write_echo_repository(tmp_path)
    with TritonServer(
        tmp_path, backend="ours", backend_config=["ipc-spin-us=200", f"ipc-lane={lane}"]
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        # tiny (inline), 64 KiB (the arena), then tiny ones back to back
        for i, n in enumerate([16, 16384] + [16] * 30 + [16384] * 5):
            x = np.arange(n, dtype=np.float32) + i
            inp = httpclient.InferInput("X", [n], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(client.infer("echo", [inp]).as_numpy("Y"), x * 2)
        client.close()


def test_forced_spin_answers_bls_calls(tmp_path: Path) -> None:
    with TritonServer(
        EXAMPLES_REPOSITORY,
        backend="ours",
        backend_config=["ipc-spin-us=200"],
        model_control_mode="explicit",
        load_models=BLS_PIPELINE_MODELS,
    ) as server:
        check_bls_pipeline(server, 20)


def stream_client() -> ModuleType:
    return example_client("stream_tokens")


def test_forced_spin_answers_decoupled_streams(tmp_path: Path) -> None:
    repo = tmp_path / "models"
    shutil.copytree(EXAMPLES_REPOSITORY / "token_stream", repo / "token_stream")
    config = repo / "token_stream" / "config.pbtxt"
    config.write_text(config.read_text().replace('string_value: "20"', 'string_value: "1"'))
    client = stream_client()
    with TritonServer(
        repo, backend="ours", backend_config=["ipc-spin-us=200"], extra_args=["--log-verbose=1"]
    ) as server:
        assert decisions(server)["token_stream"][0] == "200 us"
        for prompt in ["the quick brown fox", "a b c d e f g h"]:
            tokens = list(client.stream_tokens(server.grpc_url, prompt))
            assert tokens == [w.capitalize() for w in reversed(prompt.split())]


SPIN_CALLEE = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "IN")])
            for r in requests
        ]
"""
SPIN_CALLER = """
import os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            call = pb_utils.InferenceRequest(
                model_name="spin_callee",
                inputs=[pb_utils.get_input_tensor_by_name(request, "IN")],
                requested_output_names=["IN"],
            )
            answer = call.exec()
            if answer.has_error():
                raise pb_utils.TritonModelException(answer.error().message())
            got = pb_utils.get_output_tensor_by_name(answer, "IN").as_numpy()
            pid = np.array([os.getpid()], dtype=np.int32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("PID", got * 0 + pid)]))
        return responses
"""
SPIN_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "%s", data_type: TYPE_INT32, dims: [ 1 ] } ]
"""


def main_thread_sleeps(pid: int) -> int:
    """How often the process's main thread blocked (/proc/PID/status is the leader's)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("voluntary_ctxt_switches:"):
            return int(line.split()[1])
    raise AssertionError(f"no voluntary_ctxt_switches in /proc/{pid}/status")


@pytest.mark.parametrize(
    ("config", "sleeps"),
    [
        (["ipc-spin-us=0"], (1.5, 99)),
        (["ipc-spin-us=0", "ipc-bls-spin-us=300000"], (0, 1.5)),
        (["ipc-spin-us=300000"], (0, 0.5)),
    ],
    ids=["off", "bls-spin-only", "spin"],
)
def test_a_bls_call_on_sync_polls_for_its_answer_within_the_spin(
    tmp_path: Path, config: list[str], sleeps: tuple[float, float]
) -> None:
    """The caller stub's main thread polls for a BLS answer on sync for the BLS spin, and for
    EXECUTE for the sync spin. Counted, not timed: with both longer than any wait here (300
    ms, the BLS one ten times that, capped at 1 s) the thread sleeps almost never per
    request, without either at least twice (the answer, the next EXECUTE), with the BLS one
    alone at most once (the next EXECUTE; fewer where the next EXECUTE is already there when
    a busy machine lets the stub run again, so no lower bound). The caller's instance thread
    is woken to poll for RESULT as each answer goes out where it polls (the timers'
    lane.rearm: one per call), and not without the sync spin. The long spin runs last: its
    stubs poll until they are stopped."""
    trace = tmp_path / "trace.txt"
    for name, model, out in (
        ("spin_callee", SPIN_CALLEE, "IN"),
        ("spin_caller", SPIN_CALLER, "PID"),
    ):
        (tmp_path / "models" / name / "1").mkdir(parents=True)
        (tmp_path / "models" / name / "config.pbtxt").write_text(SPIN_CONFIG % out)
        (tmp_path / "models" / name / "1" / "model.py").write_text(model)
    env = {"PYBACKEND_GPU_TRACE": str(trace)}
    with TritonServer(
        tmp_path / "models", backend="ours", backend_config=config, env=env
    ) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        try:

            def call() -> int:
                inp = httpclient.InferInput("IN", [1], "INT32")
                inp.set_data_from_numpy(np.array([7], np.int32))
                return int(client.infer("spin_caller", [inp]).as_numpy("PID")[0])

            pid = call()
            call()
            before = main_thread_sleeps(pid)
            for _ in range(20):
                assert call() == pid
            per_request = (main_thread_sleeps(pid) - before) / 20
        finally:
            client.close()
    low, high = sleeps
    lines = trace.read_text()
    # Both stubs' sleeps on the lane (the callee's too), for the message of a failure.
    stub_sleeps = lines.count("pbtrace stub lane.sleep ")
    assert low <= per_request <= high, (per_request, stub_sleeps)
    rearms = lines.count("pbtrace backend lane.rearm ")
    assert rearms == (22 if "ipc-spin-us=300000" in config else 0), rearms
