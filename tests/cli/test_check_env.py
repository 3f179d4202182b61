"""`pybackend check-env`: an environment checked before a server loads a model with it."""

from __future__ import annotations

import subprocess
import sys
import tarfile
import venv
from pathlib import Path

import pytest

import pybackend
from pybackend.server.locate import original_venv


def check_env(path: str, tmp_path: Path, *options: str) -> subprocess.CompletedProcess:
    env = {"PYBACKEND_ENV_CACHE": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [sys.executable, "-m", "pybackend.cli", "check-env", *options, path],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_a_working_environment_reports_what_its_stubs_get(tmp_path):
    env = original_venv()
    done = check_env(str(env), tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"({env}/bin/python3), numpy 1." in done.stdout


def test_an_archive_is_unpacked_where_the_server_will_find_it(tmp_path):
    env = tmp_path / "env"
    venv.EnvBuilder(symlinks=False, with_pip=False).create(env)
    numpy_site = Path(__import__("numpy").__file__).resolve().parents[1]
    (site,) = env.glob("lib/python*/site-packages")
    (site / "numpy_from.pth").write_text(f"{numpy_site}\n")
    with tarfile.open(tmp_path / "env.tar.gz", "w:gz") as tar:
        tar.add(env, arcname=".")
    done = check_env(str(tmp_path / "env.tar.gz"), tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"unpacked {tmp_path / 'env.tar.gz'} into {tmp_path / 'cache'}")
    assert f"pybackend {pybackend.__version__} stub" in done.stdout


def test_what_cannot_work_says_why(tmp_path):
    missing = check_env(str(tmp_path / "nowhere"), tmp_path)
    assert missing.returncode == 1
    assert f"EXECUTION_ENV_PATH '{tmp_path / 'nowhere'}' does not exist" in missing.stderr
    bare = tmp_path / "bare"
    venv.EnvBuilder(symlinks=False, with_pip=False).create(bare)
    no_numpy = check_env(str(bare), tmp_path)
    assert no_numpy.returncode == 2
    assert "cannot import numpy" in no_numpy.stderr


@pytest.mark.parametrize(
    "value",
    ["$$TRITON_MODEL_DIRECTORY/../env", "4242TRITON_MODEL_DIRECTORY/../env"],
    ids=["pasted from config.pbtxt", "after the shell replaced $$ by its pid"],
)
def test_a_value_pasted_from_the_model_config_is_expanded(tmp_path, value):
    """$$TRITON_MODEL_DIRECTORY stands for --model-dir, as the backend reads it at load."""
    model_dir = tmp_path / "models" / "m"
    model_dir.mkdir(parents=True)
    (tmp_path / "models" / "env").symlink_to(original_venv())
    done = check_env(value, tmp_path, "--model-dir", str(model_dir))
    assert done.returncode == 0, done.stderr
    assert f"is {model_dir}/../env for the model in {model_dir}" in done.stdout
    assert "numpy 1." in done.stdout
