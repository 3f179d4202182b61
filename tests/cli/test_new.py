"""`pybackend new`: each template makes a model directory whose generated pytest file
passes as generated (run here as a user runs it, in its own pytest process), with the
default tensors and with names, data types and dims given as options."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

CASES = {
    "basic": [],
    "batched": [],
    "decoupled": [],
    "bls": [],
    "sequence": [],
    # Names, several inputs, BYTES, a fixed and a variable dimension, conversions.
    "basic-options": ["-t", "basic", "--name", "mixed", "-i", "TEXT:STRING", "-i", "N:INT32:2,-1",
                      "-o", "ECHO:BYTES", "-o", "AS_FLOAT:TYPE_FP64", "-o", "AGAIN:STRING"],
    "batched-options": ["-t", "batched", "-i", "PIXELS:UINT8:2,3", "-o", "SCALED:FP16"],
    "decoupled-options": ["-t", "decoupled", "-i", "PROMPT:STRING", "-o", "TOKEN:STRING"],
    "bls-options": ["-t", "bls", "--target", "ranker", "-i", "Q:INT64:5", "-o", "SCORE:FP32"],
    "sequence-options": ["-t", "sequence", "-i", "CHUNK:INT16:-1", "-i", "SPEAKER:STRING",
                         "-o", "FIRST_CHUNK:FP32", "-o", "FIRST_SPEAKER:STRING"],
}  # fmt: skip


def _pytest(directory: Path) -> subprocess.CompletedProcess:
    # -p no:cacheprovider: nothing written beside the model; the plugin (triton_model)
    # comes from the installed pybackend, as for a user.
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(directory)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=directory,
    )


@pytest.mark.parametrize("case", list(CASES))
def test_generated_model_passes_its_generated_test(cli: Cli, tmp_path: Path, case: str) -> None:
    template = case.split("-")[0]
    args = CASES[case] or ["--template", template]
    done = cli("new", tmp_path / case, *args)
    assert done.returncode == 0, done.stderr
    name = args[args.index("--name") + 1] if "--name" in args else case
    model = tmp_path / case
    test_file = model / f"test_{name.replace('-', '_')}.py"
    assert sorted(p.relative_to(model).as_posix() for p in model.rglob("*") if p.is_file()) == [
        "1/model.py",
        "config.pbtxt",
        test_file.name,
    ]
    assert f"wrote {test_file}" in done.stdout
    assert f'name: "{name}"' in (model / "config.pbtxt").read_text()
    ran = _pytest(model)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert " passed" in ran.stdout and "failed" not in ran.stdout


def test_decoupled_and_batched_configs(cli: Cli, tmp_path: Path) -> None:
    cli("new", tmp_path / "d", "-t", "decoupled")
    cli("new", tmp_path / "b", "-t", "batched")
    assert (
        "model_transaction_policy { decoupled: true }" in (tmp_path / "d/config.pbtxt").read_text()
    )
    batched = (tmp_path / "b/config.pbtxt").read_text()
    assert "max_batch_size: 8" in batched and "dynamic_batching {" in batched


@pytest.mark.parametrize(
    "args, message",
    [
        (["-i", "A:FP33"], "'A:FP33': data type 'FP33' is not one of BOOL, UINT8"),
        (["-i", "A"], "'A': expected NAME:DTYPE or NAME:DTYPE:DIMS"),
        (["-i", "A:FP32:0"], "'A:FP32:0': DIMS must be comma-separated sizes, -1 for any size"),
        (["-i", "A:FP32", "-i", "A:INT8"], "tensor name 'A' is given twice"),
        (["-i", "A:FP32", "-o", "A:FP32"], "tensor name 'A' is used twice"),
        (["-i", "A:FP32", "-o", "B:STRING"], "output B (BYTES) is made from input A (FP32)"),
        (["-i", "A:FP32:4", "-o", "B:FP32:5"], "output B has dims [5] and is made from input A"),
    ],
)
def test_options_it_refuses(cli: Cli, tmp_path: Path, args: list, message: str) -> None:
    done = cli("new", tmp_path / "m", *args)
    assert done.returncode == 1
    assert done.stderr.startswith(f"pybackend new: {message}"), done.stderr
    assert not (tmp_path / "m").exists()


def test_a_non_empty_directory_needs_force(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "m").mkdir()
    (tmp_path / "m" / "notes.txt").write_text("mine")
    done = cli("new", tmp_path / "m")
    assert done.returncode == 1
    assert "exists and is not empty (--force writes into it)" in done.stderr
    assert not (tmp_path / "m" / "config.pbtxt").exists()
    assert cli("new", tmp_path / "m", "--force").returncode == 0
    assert (tmp_path / "m" / "notes.txt").read_text() == "mine"


def test_generated_models_pass_in_a_stub_and_through_tritonserver(cli: Cli, tmp_path: Path) -> None:
    """The same generated tests in the harness's other modes: the model in a real stub
    process, and served by a real tritonserver with our backend."""
    for template in ("basic", "batched", "decoupled", "sequence"):
        assert cli("new", tmp_path / template, "-t", template).returncode == 0
    ran = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--pybackend-mode=stub,server",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "10 passed" in ran.stdout, ran.stdout
