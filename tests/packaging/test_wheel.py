"""A regular (non-editable) install must carry the backend library: build the wheel, install it
into a fresh virtual environment and ask it for its backend directory."""

from __future__ import annotations

import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from integration_support import REPO_ROOT

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(REPO_ROOT),
        ],
        check=True,
        timeout=900,
    )
    (built,) = out.glob("pybackend-*.whl")
    return built


def test_wheel_contents(wheel: Path) -> None:
    # One wheel for every CPython: the library links no libpython.
    assert "-py3-none-" in wheel.name
    archive = zipfile.ZipFile(wheel)
    names = set(archive.namelist())
    assert "pybackend/backends/python/libtriton_python.so" in names
    assert "pybackend/utils/libpybackend_native.so" in names  # the stub's BYTES decoder
    assert "triton_python_backend_utils.py" in names
    assert "pybackend/cli/main.py" in names and "pybackend/server/tritonserver.py" in names
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "pybackend = pybackend.cli.main:main" in archive.read(entry_points).decode()


def test_installed_wheel_reports_its_backend_dir(wheel: Path, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    pip = [str(env_dir / "bin" / "python"), "-m", "pip"]
    subprocess.run([*pip, "install", "-q", "--no-deps", str(wheel)], check=True, timeout=300)
    script = str(env_dir / "bin" / "pybackend")
    done = subprocess.run([script, "backend-dir"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    backends = Path(done.stdout.strip())
    assert backends.is_relative_to(env_dir)
    assert (backends / "python" / "libtriton_python.so").is_file()
