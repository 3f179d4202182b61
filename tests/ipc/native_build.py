"""Builds one of the native test programs (csrc/tests, CMake's PYBACKEND_BUILD_TESTS) into a
temporary directory, so the tests that run them need no build of their own beforehand."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def build_native_target(tmp: Path, target: str) -> Path:
    """Configure the project in ``tmp/build`` (library output in ``tmp/lib``), build
    ``target`` with warnings as errors and return the path of its executable."""
    build = tmp / "build"
    configure = [
        "cmake", "-S", str(ROOT), "-B", str(build), "-DPYBACKEND_BUILD_TESTS=ON",
        "-DPYBACKEND_WERROR=ON",
        f"-DPYBACKEND_OUTPUT_DIR={tmp / 'lib'}", f"-DPython3_EXECUTABLE={sys.executable}",
    ]  # fmt: skip
    subprocess.run(configure, check=True, capture_output=True, text=True)
    subprocess.run(
        ["cmake", "--build", str(build), "--target", target, "-j2"],
        check=True,
        capture_output=True,
        text=True,
    )
    return build / target
