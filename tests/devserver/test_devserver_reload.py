"""The development server loads models again: load and unload requests read model.py anew,
reload=True picks up an edit (and reports a broken one while the loaded version serves on),
and requests in flight across a reload of a batching model are all answered."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import List

import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from devserver_models import MODES, copy_model, write_model
from http_exchange import exchange, infer_body

from pybackend.devserver import DevServer

SCALE = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * FACTOR)])]
"""


def _scale(server: DevServer) -> float:
    body, headers = infer_body(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1]}]}
    )
    status, answer = exchange(server.http_url, "POST", "/v2/models/scale/infer", body, headers)
    assert status == 200, answer
    return answer["outputs"][0]["data"][0]


def _edit_factor(repository: Path, factor: int) -> None:
    model_py = repository / "scale" / "1" / "model.py"
    model_py.write_text(f"FACTOR = {factor}\n{SCALE}")
    os.utime(model_py, ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))  # a newer mtime


@pytest.mark.parametrize("mode", MODES)
def test_load_and_unload_requests_read_the_model_again(mode: str, tmp_path: Path) -> None:
    write_model(tmp_path, "scale", f"FACTOR = 2\n{SCALE}")
    with DevServer(
        tmp_path, grpc_port=0, in_process=mode == "inprocess", echo_logs=False
    ) as server:
        assert _scale(server) == 2
        _edit_factor(tmp_path, 3)
        assert _scale(server) == 2  # nothing reloads on its own without reload=True
        client = httpclient.InferenceServerClient(server.http_url)
        client.unload_model("scale")
        assert not client.is_model_ready("scale")
        status, body = exchange(server.http_url, "GET", "/v2/models/scale")
        assert status == 404 and "(unloaded)" in body["error"]
        client.load_model("scale")
        assert _scale(server) == 3
        _edit_factor(tmp_path, 5)
        grpcclient.InferenceServerClient(server.grpc_url).load_model("scale")
        assert _scale(server) == 5
        with pytest.raises(Exception, match="failed to poll from model repository"):
            client.load_model("nope")


@pytest.mark.parametrize("mode", MODES)
def test_reload_picks_up_an_edited_model(
    mode: str, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    write_model(tmp_path, "scale", f"FACTOR = 2\n{SCALE}")
    with DevServer(
        tmp_path, in_process=mode == "inprocess", echo_logs=False, reload=True
    ) as server:
        assert _scale(server) == 2
        _edit_factor(tmp_path, 7)
        deadline = time.monotonic() + 20
        while _scale(server) != 7:
            assert time.monotonic() < deadline, "the edit was not picked up in 20 s"
            time.sleep(0.1)
        # A model.py that no longer imports: the error is reported, the loaded version
        # keeps serving, and the broken edit is not tried again and again.
        (tmp_path / "scale" / "1" / "model.py").write_text("import no_such_module\n")
        os.utime(tmp_path / "scale" / "1" / "model.py", ns=(time.time_ns() + 2 * 10**9,) * 2)
        deadline = time.monotonic() + 20
        while "no_such_module" not in capfd.readouterr().err:
            assert time.monotonic() < deadline, "the broken edit was not reported in 20 s"
            assert _scale(server) == 7
            time.sleep(0.1)
        time.sleep(1.5)
        assert "no_such_module" not in capfd.readouterr().err
        assert _scale(server) == 7


@pytest.mark.parametrize("mode", MODES)
def test_reloading_a_batching_model_under_load_answers_every_request(
    mode: str, tmp_path: Path
) -> None:
    """Requests in flight while stacked_scale (a dynamic batcher) is loaded again all come
    back: answered, or told to send again; none hangs."""
    copy_model("stacked_scale", tmp_path)
    body, headers = infer_body(
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1, 8], "data": [1] * 8}]}
    )
    with DevServer(tmp_path, in_process=mode == "inprocess", echo_logs=False) as server:
        statuses: List[int] = []

        def client() -> None:
            for _ in range(15):
                status, answer = exchange(
                    server.http_url, "POST", "/v2/models/stacked_scale/infer", body, headers
                )
                assert status in (200, 503), answer
                statuses.append(status)

        threads = [threading.Thread(target=client) for _ in range(4)]
        for thread in threads:
            thread.start()
        for _ in range(3):
            server.models.load_model("stacked_scale")
        for thread in threads:
            thread.join(60)
            assert not thread.is_alive(), "a request hung across a reload"
    assert len(statuses) == 60 and statuses.count(200) > 0


HELPED = """
import factor
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "INPUT0").as_numpy()
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * factor.FACTOR)])]
"""


@pytest.mark.parametrize("mode", MODES)
def test_models_with_a_module_of_one_name_each_serve_their_own(mode: str, tmp_path: Path) -> None:
    """Two models import their own `factor.py` by plain name (as a stub finds it in the
    version directory): each serves its own, in-process too, and a load request reads the
    edited module again."""
    for name, value in (("scale", 2), ("triple", 3)):
        write_model(tmp_path, name, HELPED)
        (tmp_path / name / "1" / "factor.py").write_text(f"FACTOR = {value}\n")

    def answer(server: DevServer, name: str) -> float:
        body, headers = infer_body(
            {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [1], "data": [1]}]}
        )
        status, got = exchange(server.http_url, "POST", f"/v2/models/{name}/infer", body, headers)
        assert status == 200, got
        return got["outputs"][0]["data"][0]

    with DevServer(tmp_path, in_process=mode == "inprocess", echo_logs=False) as server:
        assert (answer(server, "scale"), answer(server, "triple")) == (2, 3)
        (tmp_path / "triple" / "1" / "factor.py").write_text("FACTOR = 4\n")
        httpclient.InferenceServerClient(server.http_url).load_model("triple")
        assert (answer(server, "scale"), answer(server, "triple")) == (2, 4)
