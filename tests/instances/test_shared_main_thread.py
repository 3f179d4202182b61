"""What model code may do on the thread that runs initialize and execute, the same in every
mode: an instance's own stub (and the original's) runs them on its process's main thread,
where signal handlers can be installed (``signal.signal``, asyncio's
``loop.add_signal_handler``) and ``asyncio.get_event_loop()`` gives a loop. Under ``shared``
each instance has a thread of its own: the process's main thread installs the handlers for
it (pybackend/stub/main_thread.py) and the thread has a loop of its own
(ThreadedStub._set_thread_loop). Before, both failed there (ValueError: signal only works in
main thread; RuntimeError: There is no current event loop)."""

from __future__ import annotations

import json
import textwrap

import numpy as np
import pytest
import tritonclient.http as httpclient

from pybackend.server import TritonServer

MODES = ("own", "shared", "fork")

SIGNALS_PY = textwrap.dedent("""
    import asyncio
    import json
    import os
    import signal
    import threading
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils

    RAN = []  # per handler run: did it run on the process's main thread?
    PREVIOUS = []  # what each initialize of this process found installed before its own


    def on_signal(signum, frame):
        RAN.append(threading.current_thread() is threading.main_thread())
        if len(RAN) == 2:
            raise ValueError("a handler that raises")  # the process goes on serving


    class TritonPythonModel:
        def initialize(self, args):
            previous = signal.signal(signal.SIGUSR2, on_signal)
            PREVIOUS.append({on_signal: "on_signal", signal.SIG_DFL: "SIG_DFL"}[previous])
            loop = asyncio.get_event_loop()
            self.loop = loop.run_until_complete(asyncio.sleep(0, result="loop ran"))

        def execute(self, requests):
            before = len(RAN)
            try:
                os.kill(os.getpid(), signal.SIGUSR2)
                deadline = time.monotonic() + 10
                while len(RAN) == before and time.monotonic() < deadline:
                    time.sleep(0.01)
            except ValueError:  # own and fork: the handler ran right here
                pass
            report = {"previous": sorted(PREVIOUS), "loop": self.loop, "ran": RAN[before:]}
            text = np.array([json.dumps(report).encode()], dtype=np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", text)]) for _ in requests]
    """)

ASYNC_SIGNAL_PY = textwrap.dedent("""
    import asyncio
    import os
    import signal

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            self.loop = asyncio.get_event_loop()
            self.waiting = None
            self.loop.add_signal_handler(signal.SIGUSR1, self.on_signal)

        def on_signal(self):
            self.waiting.set_result("signal came through the loop")

        def execute(self, requests):
            self.waiting = self.loop.create_future()
            os.kill(os.getpid(), signal.SIGUSR1)
            text = self.loop.run_until_complete(asyncio.wait_for(self.waiting, 10))
            out = np.array([text.encode()], dtype=np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
    """)


def config(mode: str, count: int) -> str:
    return textwrap.dedent(f"""
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "IN" data_type: TYPE_FP32 dims: [ 1 ] }} ]
        output [ {{ name: "OUT" data_type: TYPE_STRING dims: [ 1 ] }} ]
        instance_group [ {{ count: {count} kind: KIND_CPU }} ]
        parameters {{ key: "PYBACKEND_INSTANCE_PROCESS" value: {{ string_value: "{mode}" }} }}
        """)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    repo = tmp_path_factory.mktemp("main_thread") / "models"
    for mode in MODES:
        for name, source, count in (
            ("signals", SIGNALS_PY, 2),
            ("async_signal", ASYNC_SIGNAL_PY, 1),
        ):
            (repo / f"{name}_{mode}" / "1").mkdir(parents=True)
            (repo / f"{name}_{mode}" / "config.pbtxt").write_text(config(mode, count))
            (repo / f"{name}_{mode}" / "1" / "model.py").write_text(source)
    with TritonServer(repo, backend="ours") as s:
        yield s


def ask(server: TritonServer, model: str) -> str:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        tensor = httpclient.InferInput("IN", [1], "FP32")
        tensor.set_data_from_numpy(np.array([1.0], np.float32))
        return client.infer(model, [tensor]).as_numpy("OUT")[0].decode()
    finally:
        client.close()


@pytest.mark.parametrize("mode", MODES)
def test_signal_handlers_and_event_loop_of_initialize_and_execute(server, mode):
    reports = [json.loads(ask(server, f"signals_{mode}")) for _ in range(6)]
    # Each handler run happened on the main thread, one per request (the second raised: the
    # request is answered all the same, and so are the next ones).
    assert [r["ran"] for r in reports] == [[True]] * 6
    assert {r["loop"] for r in reports} == {"loop ran"}
    # Handlers are process state: under shared the second initialize found the first's.
    expected = ["SIG_DFL", "on_signal"] if mode == "shared" else ["SIG_DFL"]
    assert {tuple(r["previous"]) for r in reports} == {tuple(expected)}


@pytest.mark.parametrize("mode", MODES)
def test_an_event_loops_signal_handler(server, mode):
    for _ in range(3):
        assert ask(server, f"async_signal_{mode}") == "signal came through the loop"
