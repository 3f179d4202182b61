"""`pybackend validate --runtime NAME=DIR`: the models of a python-based backend
(docs/python_based_backends.md: the conformance suite's runtime and models) are checked with
the runtime's model.py, loaded with --run as the offline harness runs them
(ModelHarness(runtime=)); without it they are skipped, with the option named."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

CASES = Path(__file__).resolve().parents[1] / "conformance" / "python_based_backends"
RUNTIME = CASES / "runtimes" / "pbb_scaler"
MODELS = ("pbb_double", "pbb_minimal", "pbb_other", "pbb_triple")


def runtimes(path: Path = RUNTIME) -> list[str]:
    return ["--runtime", f"pbb_scaler={path}", "--runtime", f"pbb_scaler_b={path}"]


def test_without_runtime_its_models_are_skipped_with_the_option_named(cli: Cli) -> None:
    done = cli("validate", CASES / "models")
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"{CASES / 'models' / 'pbb_other'}: skipped, not a Python model (backend "
        "'pbb_scaler_b'; a python-based backend's model is checked with --runtime "
        "pbb_scaler_b=<the directory of its model.py>)"
    ) in done.stdout


@pytest.mark.parametrize("run", [[], ["--run"]])
def test_with_runtime_its_models_are_checked(cli: Cli, run: list[str]) -> None:
    done = cli("validate", CASES / "models", *run, *runtimes(), "--json", timeout=240)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert sorted(m["name"] for m in report["models"] if not m["skipped"]) == list(MODELS)
    assert report["errors"] == report["warnings"] == 0


def test_a_runtimes_findings_name_its_model_py(cli: Cli, tmp_path: Path) -> None:
    """An import the runtime's directory and this Python lack, and (with --run) a load that
    fails: each an error at the runtime's own file, for each model that runs it."""
    runtime = tmp_path / "pbb_scaler"
    shutil.copytree(RUNTIME, runtime)
    source = (runtime / "model.py").read_text()
    (runtime / "model.py").write_text("import no_such_module_here\n" + source)
    done = cli("validate", CASES / "models" / "pbb_triple", *runtimes(runtime))
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"{runtime / 'model.py'}:1: error: ModuleNotFoundError: No module named "
        "'no_such_module_here'"
    ) in done.stdout
    (runtime / "model.py").write_text(
        source.replace(
            "        self.factor = ",
            "        raise ValueError('no factor')\n        self.factor = ",
            1,
        )
    )
    done = cli("validate", CASES / "models" / "pbb_triple", "--run", *runtimes(runtime))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{runtime / 'model.py'}: error: loading the model fails: ValueError: no factor" in (
        done.stdout
    )


def test_a_malformed_runtime_is_a_bad_command_line(cli: Cli) -> None:
    done = cli("validate", CASES / "models", "--runtime", "pbb_scaler")
    assert done.returncode == 2
    assert "--runtime pbb_scaler: expected NAME=DIR" in done.stderr


def test_a_library_backends_runtime_with_another_platform_is_an_error(
    cli: Cli, tmp_path: Path
) -> None:
    """A runtime named after a library backend (NVIDIA's PyTorch Python runtime is
    backends/pytorch/model.py) takes that backend's platform or none: tritonserver's poll
    refuses the pair (tests/testing/test_load_checks.py holds the engines to the same)."""
    model = tmp_path / "models" / "paired"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('backend: "pytorch"\nplatform: "onnxruntime_onnx"\n')
    done = cli("validate", tmp_path / "models", "--runtime", f"pytorch={RUNTIME}")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        f"{model / 'config.pbtxt'}:2: error: unexpected 'platform' and 'backend' pair, "
        "got:onnxruntime_onnx, pytorch (a model of backend 'pytorch' names platform "
        '"pytorch_libtorch" or none)'
    ) in done.stdout
