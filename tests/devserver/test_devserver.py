"""What the development server does beyond answering like tritonserver: streams live,
reports models that failed to load and serves the rest, survives a crashing stub, serves
concurrent clients, echoes the models' logs, and runs from the command line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any, List, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from devserver_models import MODES, copy_model, write_model
from http_exchange import exchange, infer_body

from integration_support import EXAMPLES_REPOSITORY, REPO_ROOT, SIGINT_IGNORED
from pybackend.devserver import DevServer
from pybackend.server.processes import free_ports


def _add_sub_inputs(module: Any) -> List[Any]:
    a = module.InferInput("INPUT0", [4], "FP32")
    a.set_data_from_numpy(np.arange(4, dtype=np.float32))
    b = module.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.full(4, 10, dtype=np.float32))
    return [a, b]


def test_a_decoupled_model_streams_as_it_generates(devserver: DevServer) -> None:
    """token_stream waits TOKEN_DELAY_MS (20 ms) between tokens: streamed live, the first
    token arrives well before the last is generated; collected first, all at once."""
    arrivals: List[float] = []
    done = threading.Event()

    def on_result(result: Any, error: Any) -> None:
        assert error is None, str(error)
        arrivals.append(time.monotonic())
        if result.get_response().parameters["triton_final_response"].bool_param:
            done.set()

    prompt = grpcclient.InferInput("PROMPT", [1], "BYTES")
    prompt.set_data_from_numpy(np.array([b" ".join([b"w"] * 10)], dtype=object))
    client = grpcclient.InferenceServerClient(devserver.grpc_url)
    client.start_stream(callback=on_result)
    try:
        client.async_stream_infer("token_stream", [prompt], enable_empty_final_response=True)
        assert done.wait(30)
    finally:
        client.stop_stream()
        client.close()
    assert len(arrivals) == 11  # ten tokens, then the empty final response
    assert arrivals[-1] - arrivals[0] >= 0.1  # 9 more tokens took >= 180 ms to generate


@pytest.mark.parametrize("mode", MODES)
def test_a_model_that_fails_to_load_is_reported_and_the_rest_served(
    mode: str, tmp_path: Path
) -> None:
    copy_model("add_sub", tmp_path)
    write_model(tmp_path, "broken", "raise ImportError('no module named tokenizer_x')\n")
    with DevServer(tmp_path, in_process=mode == "inprocess", echo_logs=False) as server:
        url = server.http_url
        status, index = exchange(url, "POST", "/v2/repository/index")
        assert status == 200
        broken = next(m for m in index if m["name"] == "broken")
        assert broken["state"] == "UNAVAILABLE"
        assert "no module named tokenizer_x" in broken["reason"]
        assert exchange(url, "GET", "/v2/health/ready")[0] == 400
        status, body = exchange(url, "GET", "/v2/models/broken")
        assert status == 404
        assert "Request for unknown model: 'broken' is not found" in body["error"]
        assert "no module named tokenizer_x" in body["error"]
        client = httpclient.InferenceServerClient(url)
        out = client.infer("add_sub", _add_sub_inputs(httpclient)).as_numpy("OUTPUT0")
        assert out.tolist() == [10, 11, 12, 13]


def test_models_of_other_backends_are_listed_not_served(tmp_path: Path) -> None:
    copy_model("add_sub", tmp_path)
    (tmp_path / "detector" / "1").mkdir(parents=True)
    (tmp_path / "detector" / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    with DevServer(tmp_path, echo_logs=False) as server:
        url = server.http_url
        assert exchange(url, "GET", "/v2/health/ready")[0] == 200
        index = exchange(url, "POST", "/v2/repository/index")[1]
        (detector,) = [m for m in index if m["name"] == "detector"]
        assert detector["state"] == "UNAVAILABLE"
        assert "Python models only" in detector["reason"] and "onnxruntime" in detector["reason"]
        status, body = exchange(url, "GET", "/v2/models/detector")
        assert status == 404 and "onnxruntime" in body["error"]


def test_a_stub_that_dies_fails_its_request_and_is_restarted(tmp_path: Path) -> None:
    """As under the backend: the request that crashed the stub fails with the exit named,
    the server and its other models stay up, and the next request gets a fresh stub."""
    copy_model("add_sub", tmp_path)
    write_model(
        tmp_path,
        "crasher",
        "import os\nimport triton_python_backend_utils as pb_utils\n\n"
        "class TritonPythonModel:\n    def execute(self, requests):\n"
        "        x = pb_utils.get_input_tensor_by_name(requests[0], 'INPUT0')\n"
        "        if x.as_numpy()[0] < 0:\n            os._exit(3)\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', x.as_numpy())])]\n",
    )

    def infer(url: str, value: float) -> Tuple[int, Any]:
        body, headers = infer_body(
            {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [value]}]}
        )
        return exchange(url, "POST", "/v2/models/crasher/infer", body, headers)

    with DevServer(tmp_path, echo_logs=False) as server:
        first_stub = server.models.get("crasher").model.pid
        status, answer = infer(server.http_url, -1)
        assert status == 500
        assert "'crasher'" in answer["error"] and "exited with code 3" in answer["error"]
        client = httpclient.InferenceServerClient(server.http_url)
        out = client.infer("add_sub", _add_sub_inputs(httpclient)).as_numpy("OUTPUT1")
        assert out.tolist() == [-10, -9, -8, -7]
        status, answer = infer(server.http_url, 2)
        assert status == 200, answer
        assert answer["outputs"][0]["data"] == [2.0]
        assert server.models.get("crasher").model.pid not in (None, first_stub)


def test_a_dead_instance_is_replaced_alone(tmp_path: Path) -> None:
    """Of a model's two instances, the one whose stub died is restarted at its next
    request; the other keeps its stub, and the model's statistics go on counting.
    ``auto_complete_config`` runs once for the model, as in the server: not per instance,
    not at a restart."""
    write_model(
        tmp_path,
        "pair",
        "import os\nimport triton_python_backend_utils as pb_utils\n\n"
        "class TritonPythonModel:\n"
        "    @staticmethod\n    def auto_complete_config(config):\n"
        "        with open(os.path.join(os.path.dirname(__file__), 'completed'), 'a') as f:\n"
        "            f.write('x')\n"
        "        return config\n\n"
        "    def execute(self, requests):\n"
        "        x = pb_utils.get_input_tensor_by_name(requests[0], 'INPUT0')\n"
        "        return [pb_utils.InferenceResponse([pb_utils.Tensor('OUTPUT0', x.as_numpy())])]\n",
    )
    config = tmp_path / "pair" / "config.pbtxt"
    config.write_text(config.read_text() + "instance_group [ { kind: KIND_CPU, count: 2 } ]\n")
    with DevServer(tmp_path, echo_logs=False) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        tensor = httpclient.InferInput("INPUT0", [1], "FP32")
        tensor.set_data_from_numpy(np.array([1.5], np.float32))
        try:
            client.infer("pair", [tensor])
            served = server.models.get("pair")
            before = [m.pid for m in served.instances]
            os.kill(before[0], signal.SIGKILL)
            deadline = time.monotonic() + 10
            while served.instances[0].alive and time.monotonic() < deadline:
                time.sleep(0.02)
            for _ in range(2):
                assert client.infer("pair", [tensor]).as_numpy("OUTPUT0").tolist() == [1.5]
            after = [m.pid for m in served.instances]
            stats = client.get_inference_statistics("pair")["model_stats"][0]
        finally:
            client.close()
    assert after[1] == before[1]
    assert after[0] not in (None, before[0])
    assert stats["inference_count"] == 3
    assert (tmp_path / "pair" / "1" / "completed").read_text() == "x"


def test_concurrent_clients_each_get_their_own_answer(devserver: DevServer) -> None:
    client = httpclient.InferenceServerClient(devserver.http_url, concurrency=8)
    try:
        pending = []
        for i in range(64):
            a = httpclient.InferInput("INPUT0", [4], "FP32")
            a.set_data_from_numpy(np.full(4, i, dtype=np.float32))
            b = httpclient.InferInput("INPUT1", [4], "FP32")
            b.set_data_from_numpy(np.arange(4, dtype=np.float32))
            pending.append((i, client.async_infer("add_sub", [a, b])))
        for i, request in pending:
            assert request.get_result().as_numpy("OUTPUT0").tolist() == [i, i + 1, i + 2, i + 3]
    finally:
        client.close()


#: Logs and prints from execute (``{said}``), and from finalize.
CHATTY = (
    "import sys\nimport triton_python_backend_utils as pb_utils\n\n"
    "class TritonPythonModel:\n    def execute(self, requests):\n"
    "        pb_utils.Logger.log_warn('warned {said}')\n"
    "        print('printed {said}', file=sys.stderr, flush=True)\n"
    "        return [pb_utils.InferenceResponse([pb_utils.get_input_tensor_by_name(r, "
    "'INPUT0')]) for r in requests]\n\n"
    "    def finalize(self):\n"
    "        pb_utils.Logger.log_info('finalize logged')\n"
    "        print('finalize printed', flush=True)\n"
)


def _infer_one(server: DevServer, model: str) -> None:
    body, headers = infer_body(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1]}]}
    )
    assert exchange(server.http_url, "POST", f"/v2/models/{model}/infer", body, headers)[0] == 200


@pytest.mark.parametrize("mode", MODES)
def test_model_logs_and_prints_reach_the_terminal(
    mode: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_model(tmp_path, "chatty", CHATTY.format(said="from execute"))
    with DevServer(tmp_path, in_process=mode == "inprocess") as server:
        _infer_one(server, "chatty")
        deadline = time.monotonic() + 10
        seen = ""
        while time.monotonic() < deadline and "warned from execute" not in seen:
            time.sleep(0.2)
            seen += capfd.readouterr().err
    assert "W [chatty] model.py:6: warned from execute" in seen
    assert "printed from execute" in seen


@pytest.mark.parametrize("mode", MODES)
def test_the_last_lines_and_finalize_reach_the_terminal_at_stop(
    mode: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Stopping (Ctrl-C) right after a request: what execute logged and printed last, and
    what finalize logs and prints, are shown before the server is gone."""
    write_model(tmp_path, "parting", CHATTY.format(said="last"))
    with DevServer(tmp_path, in_process=mode == "inprocess") as server:
        _infer_one(server, "parting")
    out = capfd.readouterr()
    seen = out.err + out.out
    assert "W [parting] model.py:6: warned last" in seen
    assert "I [parting] model.py:11: finalize logged" in seen
    if mode == "stub":  # in-process, print() goes to this process's own stdout
        assert "[parting] printed last" in seen
        assert "[parting] finalize printed" in seen


@pytest.mark.parametrize("stop_signal", [signal.SIGINT, signal.SIGTERM])
def test_the_command_line_serves_until_interrupted(stop_signal: signal.Signals) -> None:
    http_port, grpc_port, metrics_port = free_ports(3)
    # Started with SIGINT ignored (a script's background job): Ctrl-C must stop it all the same.
    proc = subprocess.Popen(
        [sys.executable, "-c", SIGINT_IGNORED, sys.executable, "-m", "pybackend.cli",
         "devserve", str(EXAMPLES_REPOSITORY), "--http-port", str(http_port),
         "--grpc-port", str(grpc_port), "--metrics-port", str(metrics_port)],
        cwd=REPO_ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ),
    )  # fmt: skip
    try:
        url = f"http://127.0.0.1:{http_port}/v2/health/ready"
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(url, timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            assert proc.poll() is None, proc.communicate()[1].decode()
            assert time.monotonic() < deadline, "devserve did not become ready in 60 s"
            time.sleep(0.2)
        client = grpcclient.InferenceServerClient(f"127.0.0.1:{grpc_port}")
        out = client.infer("add_sub", _add_sub_inputs(grpcclient)).as_numpy("OUTPUT0")
        assert out.tolist() == [10, 11, 12, 13]
        client.close()
        proc.send_signal(stop_signal)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, err.decode()
        assert f"HTTP on 127.0.0.1:{http_port}" in err.decode()
        assert f"metrics on http://127.0.0.1:{metrics_port}/metrics" in err.decode()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def _prompt(words: int) -> Any:
    prompt = grpcclient.InferInput("PROMPT", [1], "BYTES")
    prompt.set_data_from_numpy(np.array([b" ".join([b"w"] * words)], dtype=object))
    return prompt


def test_the_requests_of_one_stream_run_side_by_side(devserver: DevServer) -> None:
    """As under tritonserver, token_stream serves two requests of one stream at once (its
    execute returns at once, each request streams from its own task): their responses
    interleave instead of the second waiting for the first to finish."""
    order: List[str] = []
    finals = threading.Semaphore(0)

    def on_result(result: Any, error: Any) -> None:
        assert error is None, str(error)
        response = result.get_response()
        if response.parameters["triton_final_response"].bool_param:
            finals.release()
        else:
            order.append(response.id)

    client = grpcclient.InferenceServerClient(devserver.grpc_url)
    client.start_stream(callback=on_result)
    try:
        for request_id in ("first", "second"):
            client.async_stream_infer(
                "token_stream", [_prompt(8)], request_id=request_id,
                enable_empty_final_response=True,
            )  # fmt: skip
        assert finals.acquire(timeout=30) and finals.acquire(timeout=30)
    finally:
        client.stop_stream()
        client.close()
    assert sorted(order) == ["first"] * 8 + ["second"] * 8
    assert order.index("second") < len(order) - order[::-1].index("first") - 1


CANCEL_AWARE = """
import asyncio
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        sender = requests[0].get_response_sender()
        for i in range(500):
            if sender.is_cancelled():
                pb_utils.Logger.log_info(f"cancelled after {i} responses")
                break
            out = pb_utils.Tensor("OUTPUT0", np.array([float(i)], dtype=np.float32))
            sender.send(pb_utils.InferenceResponse([out]))
            await asyncio.sleep(0.01)
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""


def _write_counter(repository: Path) -> None:
    write_model(repository, "counter", CANCEL_AWARE)
    config = repository / "counter" / "config.pbtxt"
    config.write_text(config.read_text() + "model_transaction_policy { decoupled: true }\n")


def _responses_before_cancel(server: DevServer) -> int:
    """How many responses the counter model sent before it saw is_cancelled() (it logs
    that), waited for up to 10 s."""
    model = server.models.get("counter").model
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        lines = [r.message for r in model.logs if "cancelled after" in r.message]
        if lines:
            return int(lines[0].split()[2])
        time.sleep(0.05)
    raise AssertionError("the model never saw the cancel")


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_cancels_its_stream_cancels_the_request(mode: str, tmp_path: Path) -> None:
    _write_counter(tmp_path)
    got = threading.Semaphore(0)
    with DevServer(
        tmp_path, grpc_port=0, in_process=mode == "inprocess", echo_logs=False
    ) as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        client.start_stream(callback=lambda result, error: got.release())
        x = grpcclient.InferInput("INPUT0", [1], "FP32")
        x.set_data_from_numpy(np.zeros(1, dtype=np.float32))
        client.async_stream_infer("counter", [x])
        for _ in range(3):
            assert got.acquire(timeout=30)
        client.stop_stream(cancel_requests=True)
        client.close()
        assert _responses_before_cancel(server) < 500


@pytest.mark.parametrize("mode", MODES)
def test_a_client_that_leaves_generate_stream_cancels_the_request(
    mode: str, tmp_path: Path
) -> None:
    _write_counter(tmp_path)
    with DevServer(tmp_path, in_process=mode == "inprocess", echo_logs=False) as server:
        body = json.dumps({"INPUT0": [0.0]}).encode()
        with socket.create_connection(("127.0.0.1", server.http_port), timeout=30) as conn:
            conn.sendall(
                b"POST /v2/models/counter/generate_stream HTTP/1.1\r\nHost: x\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            received = b""
            while received.count(b"data: ") < 3:
                chunk = conn.recv(4096)
                assert chunk, received
                received += chunk
        assert received.startswith(b"HTTP/1.1 200")
        assert _responses_before_cancel(server) < 500


def test_concurrent_requests_meet_in_one_execute_under_a_dynamic_batcher(
    devserver: DevServer,
) -> None:
    """stacked_scale (dynamic_batching, 50 ms queue delay, max_batch_size 16) reports how
    many rows its execute computed: requests sent together share executes, as under
    tritonserver, and each gets its own rows back."""
    client = httpclient.InferenceServerClient(devserver.http_url, concurrency=8)
    weights = np.triu(np.ones((8, 8), np.float32))
    try:
        pending = []
        for i in range(8):
            x = httpclient.InferInput("INPUT0", [1, 8], "FP32")
            x.set_data_from_numpy(np.full((1, 8), i, np.float32))
            pending.append((i, client.async_infer("stacked_scale", [x])))
        seen = []
        for i, request in pending:
            result = request.get_result()
            want = np.full((1, 8), i, np.float32) @ weights
            # Exact on purpose: sums of small integers are exact in float32 in any order, so
            # the batch this request met (timing) cannot change them.
            np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), want)
            seen.append(int(result.as_numpy("BATCH_ROWS")[0, 0]))
    finally:
        client.close()
    assert max(seen) > 1, seen
