"""Build the benchmark's native pieces (floor backend, load generator) with CMake, once."""

from __future__ import annotations

import subprocess
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
BUILD_DIR = BENCH_DIR / "build"
LOADGEN = BUILD_DIR / "bench_loadgen"
NATIVE_BACKENDS = BUILD_DIR / "backends"  # holds identity_native/libtriton_identity_native.so


def ensure_built() -> tuple[Path, Path]:
    """Configure (first time) and build; a no-op build when nothing changed."""
    if not (BUILD_DIR / "CMakeCache.txt").exists():
        _run(["cmake", "-S", str(BENCH_DIR), "-B", str(BUILD_DIR), "-DCMAKE_BUILD_TYPE=Release"])
    _run(["cmake", "--build", str(BUILD_DIR), "-j2"])
    return LOADGEN, NATIVE_BACKENDS


def _run(cmd: list[str]) -> None:
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"benchmark build failed: {' '.join(cmd)}\n{done.stdout}\n{done.stderr}")
