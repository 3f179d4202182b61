"""The server log of a model whose instances share a process (shared, fork) reads as that
of instances with processes of their own: a line the instance's code prints (stdout, stderr,
from its threads, a line that a thread never ends) names the model and instance
(``model/instance:``), Python logging records and pb_utils.Logger lines made at import time
keep their level and the model's file and line, and the Logger lines of finalize are all
there after the unload (pybackend/stub/host_output.py, csrc/backend/host_output.cc)."""

from __future__ import annotations

import re
import textwrap
import time

import numpy as np
import pytest
import tritonclient.http as httpclient

from pybackend.server import TritonServer

MODES = ("shared", "fork")

MODEL_PY = textwrap.dedent("""
    import logging
    import sys
    import threading

    import numpy as np
    import triton_python_backend_utils as pb_utils

    pb_utils.Logger.log_info("OUT-MARK import logger")  # LINE:import
    logging.getLogger("talk").warning("OUT-MARK import logging")  # LINE:import-logging


    class TritonPythonModel:
        def initialize(self, args):
            self.name = args["model_instance_name"]

        def execute(self, requests):
            out = []
            for request in requests:
                token = pb_utils.get_input_tensor_by_name(request, "TOKEN").as_numpy()[0]
                token = token.decode()
                print(f"OUT-MARK stdout {token}")
                print(f"OUT-MARK stderr {token}", file=sys.stderr)
                logging.getLogger("talk").warning(f"OUT-MARK logging {token}")  # LINE:logging
                worker = threading.Thread(target=print, args=(f"OUT-MARK thread {token}",))
                worker.start()
                worker.join()
                print(f"OUT-MARK partial {token}", end="")  # its newline comes later
                print()
                # A line its thread never ends: it goes out when the thread has ended and
                # something else is written, or (the last one) when the instance ends.
                tail = threading.Thread(target=print, args=(f"OUT-MARK tailless {token}",),
                                        kwargs={"end": ""})
                tail.start()
                tail.join()
                name = np.array([self.name.encode()], dtype=np.object_)
                out.append(pb_utils.InferenceResponse([pb_utils.Tensor("NAME", name)]))
            return out

        def finalize(self):
            pb_utils.Logger.log_warn("OUT-MARK finalize " + self.name)  # LINE:finalize
    """)


def config(mode: str) -> str:
    return textwrap.dedent(f"""
        backend: "python"
        max_batch_size: 0
        input [ {{ name: "TOKEN" data_type: TYPE_STRING dims: [ 1 ] }} ]
        output [ {{ name: "NAME" data_type: TYPE_STRING dims: [ 1 ] }} ]
        instance_group [ {{ count: 2 kind: KIND_CPU }} ]
        parameters {{ key: "PYBACKEND_INSTANCE_PROCESS" value: {{ string_value: "{mode}" }} }}
        """)


def line_of(tag: str) -> int:
    return next(n for n, text in enumerate(MODEL_PY.splitlines(), 1) if f"# LINE:{tag}" in text)


def log_lines(log: str, text: str) -> list[str]:
    return [line for line in log.splitlines() if text in line]


@pytest.fixture(scope="module")
def log(tmp_path_factory) -> dict[str, object]:
    """Each mode's model asked 6 times (tokens name the answering instance), then unloaded:
    the server's log, and which instance answered which token."""
    repo = tmp_path_factory.mktemp("output") / "models"
    for mode in MODES:
        (repo / f"talk_{mode}" / "1").mkdir(parents=True)
        (repo / f"talk_{mode}" / "config.pbtxt").write_text(config(mode))
        (repo / f"talk_{mode}" / "1" / "model.py").write_text(MODEL_PY)
    models = [f"talk_{mode}" for mode in MODES]
    answered: dict[str, str] = {}
    with TritonServer(repo, backend="ours", model_control_mode="explicit", load_models=models) as s:
        client = httpclient.InferenceServerClient(s.http_url)
        try:
            for model in models:
                for n in range(6):
                    token = f"{model}-{n}"
                    tensor = httpclient.InferInput("TOKEN", [1], "BYTES")
                    tensor.set_data_from_numpy(np.array([token.encode()], dtype=np.object_))
                    result = client.infer(model, [tensor])
                    answered[token] = result.as_numpy("NAME")[0].decode()
                client.unload_model(model)
        finally:
            client.close()
        # tritonserver unloads in the background: the finalize lines come with the unload.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not all(
            f"successfully unloaded '{model}'" in s.log_text() for model in models
        ):
            time.sleep(0.05)
        # The last tailless lines leave with their instance's end: they may trail the unload.
        while time.monotonic() < deadline and len(log_lines(s.log_text(), "tailless")) < 12:
            time.sleep(0.05)
        text = s.log_text()
    return {"text": text, "answered": answered}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["stdout", "stderr", "thread", "partial", "tailless"])
def test_printed_lines_name_the_instance(log, mode, kind):
    for token, instance in log["answered"].items():
        if not token.startswith(f"talk_{mode}-"):
            continue
        [line] = log_lines(log["text"], f"OUT-MARK {kind} {token}")
        level = "E" if kind == "stderr" else "I"
        assert line.startswith(level), line
        assert f'"talk_{mode}/{instance}: OUT-MARK {kind} {token}"' in line, line


@pytest.mark.parametrize("mode", MODES)
def test_logging_records_keep_level_file_and_line(log, mode):
    for token in (t for t in log["answered"] if t.startswith(f"talk_{mode}-")):
        [line] = log_lines(log["text"], f"OUT-MARK logging {token}")
        assert re.match(rf'^W.* model\.py:{line_of("logging")}\] "OUT-MARK logging', line), line


def test_import_time_records_keep_level_file_and_line(log):
    # One import per process that imports model.py: one in each mode (plus none elsewhere).
    loggers = log_lines(log["text"], "OUT-MARK import logger")
    assert len(loggers) == 2 and all(
        re.match(rf'^I.* model\.py:{line_of("import")}\] "OUT-MARK import logger"$', line)
        for line in loggers
    ), loggers
    records = log_lines(log["text"], "OUT-MARK import logging")
    assert len(records) == 2 and all(
        re.match(rf'^W.* model\.py:{line_of("import-logging")}\] "OUT-MARK import', line)
        for line in records
    ), records


@pytest.mark.parametrize("mode", MODES)
def test_finalize_lines_of_every_instance(log, mode):
    for instance in (f"talk_{mode}_0_0", f"talk_{mode}_0_1"):
        [line] = log_lines(log["text"], f"OUT-MARK finalize {instance}")
        assert re.match(rf'^W.* model\.py:{line_of("finalize")}\] "OUT-MARK finalize', line)
