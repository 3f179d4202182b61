"""`pybackend validate --run`: every model loaded through the offline harness (its
auto_complete_config and initialize), then one generated request each; outputs that differ
from the configuration are warnings (tritonserver passes them on), load failures errors."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

TESTS = Path(__file__).resolve().parents[1]
EXAMPLES = TESTS.parent / "examples" / "model_repository"
AUTO_COMPLETE = TESTS / "conformance" / "auto_complete" / "models"

IO = """backend: "python"
input [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 4 ] } ]
"""


def _model(repo: Path, name: str, config: str, model_py: str) -> Path:
    (repo / name / "1").mkdir(parents=True)
    (repo / name / "config.pbtxt").write_text(config)
    (repo / name / "1" / "model.py").write_text(model_py)
    return repo / name


def _returning(expression: str) -> str:
    return (
        "import numpy as np\n"
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        out = []\n"
        "        for r in requests:\n"
        '            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()\n'
        f'            y = pb_utils.Tensor("Y", {expression})\n'
        "            out.append(pb_utils.InferenceResponse([y]))\n"
        "        return out\n"
    )


def _findings(cli: Cli, path: Path) -> list:
    done = cli("validate", path, "--run", "--json")
    doc = json.loads(done.stdout)
    return [
        (m["name"], f["severity"], f["check"], f["message"])
        for m in doc["models"]
        for f in m["findings"]
    ]


def test_the_examples_run_clean(cli: Cli) -> None:
    done = cli("validate", EXAMPLES, "--run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[-1].endswith("(0 errors, 0 warnings)")
    # The BLS examples reach their callees: every model is loaded before any request.
    assert "not ready" not in done.stdout
    # error_model answers every request with an error: a note, not a failure.
    note = "error_model/1/model.py: note: the generated request (ones, every -1 dimension 1)"
    assert note in done.stdout
    # running_sum sits behind the sequence batcher: its request is a sequence of one.
    assert "running_sum/1/model.py" not in done.stdout


def test_outputs_that_differ_from_the_config_are_warnings(cli: Cli, tmp_path: Path) -> None:
    _model(tmp_path, "wrong_type", IO, _returning("x.astype(np.int64)"))
    _model(tmp_path, "wrong_shape", IO, _returning("np.stack([x, x])"))
    _model(tmp_path, "right", IO, _returning("x * 2"))
    decoupled = IO + "model_transaction_policy { decoupled: true }\n"
    _model(
        tmp_path,
        "stream_wrong",
        decoupled,
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        for r in requests:\n"
        "            s = r.get_response_sender()\n"
        '            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()\n'
        '            s.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x[:2])]))\n'
        "            s.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)\n",
    )
    done = cli("validate", tmp_path, "--run")
    assert done.returncode == 0, done.stdout  # warnings only
    passes = (
        ' (tritonserver passes it on as it is; PYBACKEND_STRICT_OUTPUTS: "true" makes it an error)'
    )
    assert sorted(f for f in _findings(cli, tmp_path)) == [
        (
            "stream_wrong",
            "warning",
            "output",
            "output 'Y' of model instance 'stream_wrong_0' has shape [2] but the model "
            "configuration declares [4] (-1: any size): reshape the array or fix config.pbtxt"
            + passes,
        ),
        (
            "wrong_shape",
            "warning",
            "output",
            "output 'Y' of model instance 'wrong_shape_0' has shape [2, 4] but the model "
            "configuration declares [4] (-1: any size): reshape the array or fix config.pbtxt"
            + passes,
        ),
        (
            "wrong_type",
            "warning",
            "output",
            "output 'Y' of model instance 'wrong_type_0' has data type TYPE_INT64 but the "
            "model configuration declares TYPE_FP32: convert the array (e.g. numpy astype) or "
            "fix config.pbtxt" + passes,
        ),
    ]
    # Without --run, nothing runs: nothing to say.
    assert cli("validate", tmp_path).stdout.splitlines()[-1].endswith("(0 errors, 0 warnings)")


def test_load_failures_are_errors(cli: Cli, tmp_path: Path) -> None:
    _model(
        tmp_path,
        "init_fails",
        IO,
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        '        raise RuntimeError("no weights here")\n'
        "    def execute(self, requests):\n"
        "        return []\n",
    )
    shutil.copytree(AUTO_COMPLETE / "ac_conflict_dtype", tmp_path / "ac_conflict_dtype")
    done = cli("validate", tmp_path, "--run")
    assert done.returncode == 1
    found = {(n, s, c): m.split("\n")[0] for n, s, c, m in _findings(cli, tmp_path)}
    assert found == {
        ("ac_conflict_dtype", "error", "load"): "loading the model fails: ValueError: unable to "
        "load model 'ac_conflict_dtype', configuration expects datatype TYPE_INT32 for input "
        "'IN', model provides TYPE_FP32",
        ("init_fails", "error", "load"): "loading the model fails: RuntimeError: no weights here",
    }


def test_the_completed_config_is_checked(cli: Cli, tmp_path: Path) -> None:
    """A model that declares its inputs in auto_complete_config: without --run its names
    are not checked (a note says so); with --run, against what the method declared."""
    model = Path(shutil.copytree(AUTO_COMPLETE / "ac_full", tmp_path / "ac_full"))
    source = (model / "1" / "model.py").read_text()
    (model / "1" / "model.py").write_text(
        source.replace('by_name(request, "IN0")', 'by_name(request, "IN9")')
    )
    found = [f for f in _findings(cli, model) if f[1] != "note"]
    assert found == [
        (
            "ac_full",
            "error",
            "tensor-name",
            "get_input_tensor_by_name(..., 'IN9'): the configuration declares no input 'IN9' "
            "(it declares 'IN0', 'IN1'), so this returns None",
        )
    ]
    plain = cli("validate", model)
    assert plain.returncode == 0
    assert "model.py has auto_complete_config" in plain.stdout


def test_a_model_that_never_answers_is_given_up_on(cli: Cli, tmp_path: Path) -> None:
    _model(
        tmp_path,
        "hangs",
        IO,
        "import threading\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        threading.Event().wait()\n",
    )
    done = cli("validate", tmp_path, "--run", timeout=120)
    assert done.returncode == 0, done.stderr  # a warning: the server would wait as long
    assert done.stdout.splitlines() == [
        f"{tmp_path}/hangs/1/model.py: warning: the generated request got no answer within "
        "30 s (abandoned): does execute wait for something that never comes?",
        "1 model checked: 1 without errors, 0 with errors (0 errors, 1 warning)",
    ]


def test_a_model_that_ends_the_process_is_named(cli: Cli, tmp_path: Path) -> None:
    _model(
        tmp_path,
        "exits",
        IO,
        "import os\n\n\n"
        "class TritonPythonModel:\n"
        "    def execute(self, requests):\n"
        "        os._exit(3)\n",
    )
    done = cli("validate", tmp_path, "--run")
    assert done.returncode == 1
    assert done.stderr == (
        "pybackend validate: the model code ended the process (exit code 3): model 'exits' "
        f"({tmp_path}/exits) while executing the generated request. --run runs every model in "
        "one process; check that model without --run, or test it in a stub process "
        "(pybackend.testing.StubModel)\n"
    )


def test_notes(cli: Cli, tmp_path: Path) -> None:
    """What --run could not do or saw on the way is a note, not a failure."""
    bf16 = IO.replace("TYPE_FP32, dims: [ 4 ] } ]\noutput", "TYPE_BF16, dims: [ 4 ] } ]\noutput")
    _model(tmp_path, "bf16", bf16, _returning("x"))
    _model(
        tmp_path,
        "warns",
        IO,
        _returning("x").replace(".as_numpy()\n", ".as_numpy()\n            np.log(0.0 * x)\n"),
    )
    done = cli("validate", tmp_path, "--run")
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines() == [
        f"{tmp_path}/bf16: ok",
        f"{tmp_path}/bf16/1/model.py: note: no request sent: an input's data type cannot be "
        "generated",
        f"{tmp_path}/warns: ok",
        f"{tmp_path}/warns/1/model.py: note: a warning while the model ran: RuntimeWarning: "
        "divide by zero encountered in log",
        "2 models checked: 2 without errors, 0 with errors (0 errors, 0 warnings)",
    ]


def test_a_stream_without_final_is_named_as_such(tmp_path: Path) -> None:
    # Before, the request's bound ran out first: "got no answer ... does execute wait",
    # though execute had returned and one response had come.
    from pybackend.testing import ModelHarness
    from pybackend.validate.findings import ModelReport
    from pybackend.validate.run_checks import _request

    config = IO + "model_transaction_policy { decoupled: true }\n"
    model = _model(
        tmp_path,
        "no_final",
        config,
        "import triton_python_backend_utils as pb_utils\n\n\n"
        "class TritonPythonModel:\n"
        "    def initialize(self, args):\n"
        "        self.senders = []\n\n"
        "    def execute(self, requests):\n"
        "        for r in requests:\n"
        "            self.senders.append(r.get_response_sender())\n"
        '            x = pb_utils.get_input_tensor_by_name(r, "X")\n'
        '            y = pb_utils.Tensor("Y", x.as_numpy())\n'
        "            self.senders[-1].send(pb_utils.InferenceResponse([y]))\n",
    )
    report = ModelReport("no_final", model)
    with ModelHarness(model) as harness:
        _request(report, "1/model.py", harness, 0.5)
    assert [(f.severity, f.check, f.message) for f in report.findings] == [
        (
            "warning",
            "run",
            "no FINAL from the response sender of 'no_final' within 0.5 s (1 responses so far):"
            " execute returned, but the request's response sender never sent its last response"
            " (flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)",
        )
    ]
