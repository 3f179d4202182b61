"""Model names a repository may hold that are not plain identifiers: spaces, non-ASCII
letters, quotes, '%' and '$' and a backslash, punctuation, 250 characters, in a repository
whose path has such characters too. Each loads, imports from its directory, answers, is
reached by BLS and names its instances in the server log, in every instance mode.

The original fails on most of them (probed with the wheel's backend, 2026-11-29): a name with
a space, a quote, '%s', '$HOME' or a backslash ends the whole server (`terminate called after
throwing an instance of 'std::invalid_argument' what(): stol`: the stub's command line goes
through a shell), and a non-ASCII one fails its load (`UnicodeEncodeError: 'ascii' codec
can't encode character`). Ours passes names as arguments and UTF-8 text, never through a
shell or an ASCII codec (docs/compatibility.md, "Deliberate differences")."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from pybackend.server import TritonServer

NAMES = ("a b c", "modèle-ü_1", "x.v1+r2@tag", 'it\'s "q"%s%n$HOME\\', "m" * 250)

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { kind: KIND_CPU, count: 2 } ]
"""

TARGET = """
import triton_python_backend_utils as pb_utils
from helper import FACTOR  # from the version directory, wherever the repository is

class TritonPythonModel:
    def initialize(self, args):
        print("serving as", args["model_instance_name"], flush=True)

    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x * FACTOR)]))
        return out
"""

# Asks every named model through BLS and returns the sum of their answers.
CALLER = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

NAMES = json.loads(%r)

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X")
            total = np.zeros(x.as_numpy().shape, np.float32)
            for name in NAMES:
                answer = pb_utils.InferenceRequest(
                    model_name=name, inputs=[x], requested_output_names=["Y"]
                ).exec()
                if answer.has_error():
                    raise pb_utils.TritonModelException(answer.error().message())
                total += pb_utils.get_output_tensor_by_name(answer, "Y").as_numpy()
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", total)]))
        return out
"""


def _logged(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)[1:-1]


def _write(root: Path, name: str, model: str, mode: str) -> None:
    (root / name / "1").mkdir(parents=True)
    extra = ""
    if mode != "own":
        extra = (
            'parameters { key: "PYBACKEND_INSTANCE_PROCESS" '
            f'value: {{ string_value: "{mode}" }} }}\n'
        )
    (root / name / "config.pbtxt").write_text(CONFIG + extra, encoding="utf-8")
    (root / name / "1" / "model.py").write_text(model, encoding="utf-8")
    (root / name / "1" / "helper.py").write_text("FACTOR = 2\n")


@pytest.mark.parametrize("mode", ["own", "shared", "fork"])
def test_unusual_model_names_load_answer_and_are_reached_by_bls(tmp_path: Path, mode: str) -> None:
    # The repository's own path has the same characters: the original fails there the same ways.
    repo = tmp_path / "model repo 'ü' $HOME"
    for name in NAMES:
        _write(repo, name, TARGET, mode)
    _write(repo, "caller", CALLER % json.dumps(NAMES), mode)
    x = np.arange(5000, dtype=np.float32)  # past the inline size: a shared-memory block
    with TritonServer(repo, backend="ours") as server:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        for name in NAMES:
            assert client.is_model_ready(name), name
            inp = grpcclient.InferInput("X", [x.size], "FP32")
            inp.set_data_from_numpy(x)
            np.testing.assert_array_equal(client.infer(name, [inp]).as_numpy("Y"), x * 2)
        inp = grpcclient.InferInput("X", [x.size], "FP32")
        inp.set_data_from_numpy(x)
        total = client.infer("caller", [inp]).as_numpy("Y")
        np.testing.assert_array_equal(total, x * 2 * len(NAMES))
        log = server.log_text()
    for name in NAMES:
        for instance in (f"{name}_0_0", f"{name}_0_1"):
            # tritonserver's log escapes a message's quotes and backslashes as JSON does.
            assert _logged(f"serving as {instance}") in log, instance
