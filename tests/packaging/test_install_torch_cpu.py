"""scripts/install_torch_cpu.sh: which local wheel a test environment gets, and nothing where
none fits (the torch cases then skip). The real install is `make venv`'s."""

from __future__ import annotations

import os
import subprocess
import sys
import venv
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_torch_cpu.sh"
TAG = f"cp{sys.version_info.major}{sys.version_info.minor}"


def run(env_dir: Path, wheels: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TORCH_WHEELS": str(wheels)}
    return subprocess.run(
        ["bash", str(SCRIPT), str(env_dir)], capture_output=True, text=True, env=env, timeout=60
    )


def test_no_wheel_for_this_python_installs_nothing(tmp_path: Path):
    env_dir = tmp_path / "env"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    # Wheels for other Pythons and a CUDA build for this one: none is taken.
    others = [t for t in ("cp39", "cp313") if t != TAG]
    names = [f"torch-2.13.0+cpu-{t}-{t}-manylinux_2_28_x86_64.whl" for t in others]
    names.append(f"torch-2.13.0-{TAG}-{TAG}-manylinux_2_28_x86_64.whl")
    for name in names:
        (wheels / name).write_bytes(b"")
    done = run(env_dir, wheels)
    assert done.returncode == 0, done.stderr
    assert f"no torch CPU wheel for {TAG}" in done.stdout
    assert "the torch cases skip there" in done.stdout
    assert not list(env_dir.glob("lib/python*/site-packages/torch*"))


def test_an_environment_with_torch_is_left_alone(tmp_path: Path):
    env_dir = tmp_path / "env"
    site = env_dir / "lib" / "python3.11" / "site-packages"
    (site / "torch-2.13.0+cpu.dist-info").mkdir(parents=True)
    # No interpreter there at all: the script returns before it would need one.
    done = run(env_dir, tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
