"""A stub started with another interpreter (python-executable, PYBACKEND_PYTHON) imports
that interpreter's own numpy, not the one of the server environment whose site-packages
holds pybackend (README, "Model code written for NumPy 1")."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pybackend
from pybackend.server.locate import original_venv


def server_site_packages(tmp_path: Path) -> Path:
    """What the backend puts first on PYTHONPATH for a wheel install: a site-packages that
    holds pybackend, pb_utils and a numpy of its own (here one that says so)."""
    site = tmp_path / "site-packages"
    (site / "numpy").mkdir(parents=True)
    (site / "numpy" / "__init__.py").write_text("__version__ = 'server-numpy'\n")
    source = Path(pybackend.__file__).resolve().parent
    (site / "pybackend").symlink_to(source)
    (site / "triton_python_backend_utils.py").symlink_to(
        source.parent / "triton_python_backend_utils.py"
    )
    return site


def stub_versions(python: Path, site: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [str(python), "-m", "pybackend.stub", "--version"],
        env=env,
        cwd=site.parent,  # not the checkout: `-m` looks in the working directory first
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_interpreters_own_numpy_wins(tmp_path):
    out = stub_versions(original_venv() / "bin" / "python3", server_site_packages(tmp_path))
    assert "numpy 1." in out, out


def test_an_interpreter_without_numpy_still_gets_the_servers(tmp_path):
    import venv

    bare = tmp_path / "bare"
    venv.EnvBuilder(symlinks=True, with_pip=False).create(bare)
    out = stub_versions(bare / "bin" / "python3", server_site_packages(tmp_path))
    assert "numpy server-numpy" in out, out
