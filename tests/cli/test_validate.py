"""`pybackend validate`, run as a user runs it: the examples pass; each broken model of
validate_cases.py gets exactly its findings; and a real tritonserver refuses each of those
the server refuses with the same words (so validate's errors are the server's)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Dict, List

import pytest
from validate_cases import CASES, make

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.fixture(scope="module")
def broken_repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = tmp_path_factory.mktemp("broken")
    for name, case in CASES.items():
        make(repo, name, case)
    return repo


@pytest.fixture(scope="module")
def report(broken_repo: Path, cli: Cli) -> Dict[str, Any]:
    # The fixture, not `from conftest import`: in a whole-suite run that name is whichever
    # tests/*/conftest.py Python imported first.
    done = cli("validate", broken_repo, "--json")
    assert done.returncode == 1, done.stderr
    doc = json.loads(done.stdout)
    assert doc["errors"] == sum(1 for c in CASES.values() for e in c.expected if e[0] == "error")
    return {m["name"]: m for m in doc["models"]}


def _found(model: Dict[str, Any]) -> List[tuple]:
    return sorted(
        (f["severity"], f["check"], f["message"], f["file"], f["line"])
        for f in model["findings"]
        if f["severity"] != "note"
    )


@pytest.mark.parametrize("name", list(CASES))
def test_each_check_has_its_exact_finding(
    report: Dict[str, Any], broken_repo: Path, name: str
) -> None:
    directory = str(broken_repo / name)
    want = sorted(
        (s, c, m.replace("{dir}", directory), f, ln) for s, c, m, f, ln in CASES[name].expected
    )
    assert _found(report[name]) == want


def test_the_examples_pass(cli: Cli) -> None:
    done = cli("validate", EXAMPLES)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    models = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())
    assert lines[:-1] == [f"{EXAMPLES / m}: ok" for m in models]
    n = len(models)
    assert (
        lines[-1] == f"{n} models checked: {n} without errors, 0 with errors (0 errors, 0 warnings)"
    )
    assert "\033[" not in done.stdout  # piped: no colour


def test_a_report_in_plain_lines(cli: Cli, tmp_path: Path) -> None:
    make(tmp_path, "pref_gt_max", CASES["pref_gt_max"])
    make(tmp_path, "dup_input", CASES["dup_input"])
    done = cli("validate", tmp_path)
    assert done.returncode == 1
    assert done.stdout.splitlines() == [
        f"{tmp_path}/dup_input/config.pbtxt:4: warning: model input 'X' is declared more than "
        "once: tritonserver loads the model, but only one declaration can describe the tensor; "
        "keep one",
        f"{tmp_path}/pref_gt_max/config.pbtxt:3: error: dynamic batching preferred size must "
        "be <= max batch size (16 > max_batch_size 8)",
        "2 models checked: 1 without errors, 1 with errors (1 error, 1 warning)",
    ]
    # One model directory is checked alone; warnings alone do not fail.
    assert cli("validate", tmp_path / "dup_input").returncode == 0


def test_a_syntax_error_is_file_line_column(cli: Cli, tmp_path: Path) -> None:
    make(tmp_path, "syntax", CASES["syntax"])
    done = cli("validate", tmp_path / "syntax")
    assert done.stdout.splitlines()[0] == (
        f"{tmp_path}/syntax/config.pbtxt:2:1: error: failed to read text proto: Message type "
        '"inference.ModelConfig" has no field named "foo".'
    )


def test_auto_complete_models_are_checked_with_run_only(cli: Cli, tmp_path: Path) -> None:
    d = tmp_path / "ac"
    (d / "1").mkdir(parents=True)
    (d / "1" / "model.py").write_text(
        "class TritonPythonModel:\n"
        "    @staticmethod\n"
        "    def auto_complete_config(config):\n"
        "        return config\n"
        "    def execute(self, requests):\n"
        "        return []\n"
    )
    done = cli("validate", d)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines() == [
        f"{d}: ok",
        f"{d}: note: no config.pbtxt: the model's auto_complete_config makes it",
        f"{d}: note: model.py has auto_complete_config, which may add inputs, outputs and "
        "dims: they are checked with --run, on the configuration it makes",
        "1 model checked: 1 without errors, 0 with errors (0 errors, 0 warnings)",
    ]


def test_no_model_there(cli: Cli, tmp_path: Path) -> None:
    done = cli("validate", tmp_path)
    assert done.returncode == 1
    assert done.stderr == (
        f"pybackend validate: {tmp_path} holds no model: a model directory has config.pbtxt "
        "or a version directory (1/model.py), a repository has model directories\n"
    )
    assert cli("validate").returncode == 2  # usage error
    missing = cli("validate", tmp_path / "missing")
    assert missing.returncode == 1
    assert missing.stderr == (
        f"pybackend validate: {tmp_path / 'missing'} is not a directory (give a model "
        "directory or a repository)\n"
    )


def test_a_directory_that_holds_no_model_fails_the_servers_start(cli: Cli, tmp_path: Path) -> None:
    """tritonserver takes every directory of a repository for a model, a hidden one too
    (pytest run in the repository leaves `.pytest_cache` there): its start fails on it, and
    validate says so in its words. A file beside the models is nobody's concern."""
    shutil.copytree(EXAMPLES / "add_sub", tmp_path / "add_sub")
    (tmp_path / ".pytest_cache" / "v" / "cache").mkdir(parents=True)
    (tmp_path / "notes").mkdir()
    (tmp_path / "README.txt").write_text("models\n")
    done = cli("validate", tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr

    refused = {  # a dotted name is read as model.<backend>, which then has no version
        ".pytest_cache": "failed to load model '.pytest_cache': at least one version must be "
        "available under the version policy of model '.pytest_cache'",
        "notes": "Poll failed for model directory 'notes': Invalid model name: Could not "
        "determine backend for model 'notes' with no backend in model configuration. "
        "Expected model name of the form 'model.<backend_name>'.",
    }
    hint = (
        " (tritonserver takes every directory of the repository for a model, so its start "
        "fails on this one unless models are loaded explicitly: move the directory out of "
        "the repository)"
    )
    said = {name: text.split(": ", 1)[1] for name, text in refused.items()}
    assert done.stdout.splitlines() == [
        f"{tmp_path}/add_sub: ok",
        f"{tmp_path}/.pytest_cache: error: {said['.pytest_cache']}{hint}",
        f"{tmp_path}/notes: error: {said['notes']}{hint}",
        "3 models checked: 1 without errors, 2 with errors (2 errors, 0 warnings)",
    ]
    ports = ["--http-port", "0", "--grpc-port", "0", "--metrics-port", "0"]
    served = cli("serve", tmp_path, "--check", *ports, timeout=240)
    assert served.returncode == 1, served.stdout + served.stderr
    for text in refused.values():
        assert text in served.stderr
    assert (
        f"pybackend serve: `pybackend validate {tmp_path}` names what the server refuses in "
        "the repository, with the file and line of each" in served.stderr
    )


def test_tritonserver_refuses_them_in_the_same_words(
    broken_repo: Path, report: Dict[str, Any]
) -> None:
    """The differential half: each case the server refuses, loaded into a real
    tritonserver with our backend; its refusal (the load error, or for a model the
    repository poll rejects, the server log's line) holds the case's words, and so does
    validate's finding."""
    import tritonclient.http as http
    from tritonclient.utils import InferenceServerException

    from pybackend.server import TritonServer

    refused = {n: c for n, c in CASES.items() if c.server}
    with TritonServer(broken_repo, model_control_mode="explicit", ready_timeout=120) as server:
        client = http.InferenceServerClient(server.http_url, network_timeout=120)
        said: Dict[str, str] = {}
        for name in refused:
            try:
                client.load_model(name)
                said[name] = "loaded"
            except InferenceServerException as e:
                said[name] = str(e)
        log = server.log_text()
        client.close()
    for name, case in refused.items():
        words = case.server.replace("{dir}", str(broken_repo / name))
        polled = [
            ln for ln in log.splitlines() if f"Poll failed for model directory '{name}'" in ln
        ]
        assert words in said[name] + "\n".join(polled), (name, said[name], polled)
        messages = [f["message"] for f in report[name]["findings"]]
        assert any(words in m for m in messages), (name, messages)


def test_colour_only_on_a_terminal(cli_on_terminal: Any, tmp_path: Path) -> None:
    make(tmp_path, "pref_gt_max", CASES["pref_gt_max"])
    out = cli_on_terminal("validate", tmp_path)
    assert f"{tmp_path}/pref_gt_max/config.pbtxt:3: \033[31merror\033[0m: dynamic batching" in out
    assert "\033[1m1 model checked" in out


def test_what_is_not_checked_is_said(cli: Cli, tmp_path: Path) -> None:
    """An ensemble (another backend) is skipped; a model in an EXECUTION_ENV_PATH
    environment gets its imports checked there, not here."""
    (tmp_path / "pipeline" / "1").mkdir(parents=True)
    (tmp_path / "pipeline" / "config.pbtxt").write_text('platform: "ensemble"\n')
    env_case = CASES["env_no_python"]
    make(tmp_path, "in_env", env_case)
    (tmp_path / "in_env" / "env" / "bin").mkdir()
    (tmp_path / "in_env" / "env" / "bin" / "python3").write_text("")
    done = cli("validate", tmp_path)
    assert done.returncode == 0, done.stdout
    assert done.stdout.splitlines() == [
        f"{tmp_path}/in_env: ok",
        f"{tmp_path}/in_env/1/model.py: note: imports not checked: the model runs in "
        "EXECUTION_ENV_PATH",
        f"{tmp_path}/pipeline: skipped, not a Python model (backend 'ensemble')",
        "1 model checked: 1 without errors, 0 with errors (0 errors, 0 warnings)",
    ]
