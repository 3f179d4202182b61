"""Native build glue: CMake compiles csrc/ into pybackend/backends/python/libtriton_python.so.

Everything declarative lives in pyproject.toml. This file only exists because setuptools
cannot drive CMake by itself: a placeholder extension hands the native step to CMake, and
the result is placed where tritonserver looks for it (`<backends>/python/libtriton_python.so`,
no ABI-tagged suffix).

Knobs (environment variables):
  PYBACKEND_BUILD_JOBS    parallel compile jobs (default 2: CI and dev machines have 2 cores)
  PYBACKEND_BUILD_TYPE    CMAKE_BUILD_TYPE (default Release)
  PYBACKEND_CMAKE_ARGS    extra arguments for the CMake configure step (e.g. sanitizers)
  PYBACKEND_SKIP_NATIVE=1 install the Python parts only (offline harness, no backend library)
  PYBACKEND_CROSS=aarch64 cross-compile for aarch64 Linux with aarch64-linux-gnu-g++ (the
                          wheel is tagged linux_aarch64; scripts/build_wheel.sh, make wheel-aarch64)
"""

from __future__ import annotations

import filecmp
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

try:  # setuptools >= 70.1 ships bdist_wheel itself (pyproject.toml asks for it)
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover - an old setuptools in a --no-build-isolation build
    bdist_wheel = None

ROOT = Path(__file__).resolve().parent
BACKEND_PACKAGE_DIR = Path("pybackend", "backends", "python")
LIBRARY_NAME = "libtriton_python.so"
EXTENSION_NAME = "pybackend.backends.python.libtriton_python"
INTERPRETER_FILE = "python_executable"
# The stub's optional ctypes helpers (csrc/stub_native), built by the same CMake run.
NATIVE_HELPERS = Path("pybackend", "utils", "libpybackend_native.so")


#: PYBACKEND_CROSS's targets: the CMake toolchain settings and the wheel's platform.
CROSS_TARGETS = {
    "aarch64": (
        [
            "-DCMAKE_SYSTEM_NAME=Linux",
            "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
            "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
        ],
        "linux_aarch64",
    ),
}


def _cross_target() -> tuple[list[str], str] | None:
    name = os.environ.get("PYBACKEND_CROSS", "")
    if not name:
        return None
    if name not in CROSS_TARGETS:
        sys.exit(f"pybackend: PYBACKEND_CROSS={name!r}: known targets are {sorted(CROSS_TARGETS)}")
    return CROSS_TARGETS[name]


def _replace_file(src: Path, dst: Path) -> None:
    """Copy src over dst atomically, and only when the content differs.

    A running tritonserver may have dst mapped; overwriting it in place would crash that
    server (SIGBUS), while a rename leaves the old inode intact for it.
    """
    if dst.exists() and filecmp.cmp(src, dst, shallow=False):
        return
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.tmp{os.getpid()}")
    shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def _write_text(path: Path, text: str) -> None:
    if path.exists() and path.read_text() == text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


class CMakeBuild(build_ext):
    """Runs CMake configure + build; CMakeLists.txt writes the library into the source tree."""

    def get_ext_filename(self, fullname: str) -> str:
        if fullname == EXTENSION_NAME:
            # tritonserver dlopens exactly "libtriton_python.so".
            return str(BACKEND_PACKAGE_DIR / LIBRARY_NAME)
        return super().get_ext_filename(fullname)

    def get_ext_fullpath(self, ext_name: str) -> str:
        if ext_name == EXTENSION_NAME:
            base = ROOT if self.inplace else Path(self.build_lib)
            return str(base / BACKEND_PACKAGE_DIR / LIBRARY_NAME)
        return super().get_ext_fullpath(ext_name)

    def build_extension(self, ext: Extension) -> None:
        if ext.name != EXTENSION_NAME:
            super().build_extension(ext)
            return
        built = self._run_cmake()
        dest = Path(self.get_ext_fullpath(ext.name))
        _replace_file(built, dest)
        base = ROOT if self.inplace else Path(self.build_lib)
        if (ROOT / NATIVE_HELPERS).exists():
            _replace_file(ROOT / NATIVE_HELPERS, base / NATIVE_HELPERS)
        # The backend starts stubs with the interpreter this package was installed for. Only an
        # in-place (editable) build knows it: a wheel is built in a throw-away environment and
        # installed elsewhere, so it carries no such file (`pybackend backend-dir`, or
        # docker/install.sh, writes it where the wheel is installed).
        if self.editable_mode or self.inplace:
            _write_text(built.parent / INTERPRETER_FILE, sys.executable + "\n")

    def copy_extensions_to_source(self) -> None:
        # Editable installs: CMake already wrote the library into the source tree; only copy
        # (atomically) if it somehow differs.
        for ext in self.extensions:
            src = Path(self.build_lib) / BACKEND_PACKAGE_DIR / LIBRARY_NAME
            if ext.name == EXTENSION_NAME and src.exists():
                _replace_file(src, ROOT / BACKEND_PACKAGE_DIR / LIBRARY_NAME)

    def _run_cmake(self) -> Path:
        cmake = shutil.which("cmake")
        if cmake is None:
            sys.exit("pybackend: building the backend library needs CMake (apt-get install cmake)")
        if not (ROOT / "CMakeLists.txt").exists():
            sys.exit(f"pybackend: {ROOT / 'CMakeLists.txt'} is missing; cannot build the backend")
        cross = _cross_target()
        platform = cross[1] if cross else sysconfig.get_platform()
        build_dir = ROOT / "build" / f"cmake-{platform}-{sys.implementation.cache_tag}"
        build_type = os.environ.get("PYBACKEND_BUILD_TYPE", "Release")
        jobs = os.environ.get("PYBACKEND_BUILD_JOBS", "2")
        configure = [
            cmake,
            "-S",
            str(ROOT),
            "-B",
            str(build_dir),
            f"-DCMAKE_BUILD_TYPE={build_type}",
            f"-DPython3_EXECUTABLE={sys.executable}",
            *(cross[0] if cross else []),
            *shlex.split(os.environ.get("PYBACKEND_CMAKE_ARGS", "")),
        ]
        self._check_call(configure)
        self._check_call([cmake, "--build", str(build_dir), "--parallel", jobs])
        built = ROOT / BACKEND_PACKAGE_DIR / LIBRARY_NAME
        if not built.exists():
            sys.exit(f"pybackend: CMake finished but {built} was not produced")
        return built

    @staticmethod
    def _check_call(cmd: list[str]) -> None:
        print("pybackend build:", shlex.join(cmd), flush=True)
        subprocess.check_call(cmd, cwd=ROOT)


def _commands() -> dict[str, type]:
    commands: dict[str, type] = {"build_ext": CMakeBuild}
    if bdist_wheel is not None:

        class AnyPythonWheel(bdist_wheel):
            """Tag wheels py3-none-<platform>: the library links no libpython and the stub is
            pure Python, so one wheel serves every CPython version."""

            def get_tag(self) -> tuple[str, str, str]:
                _, _, platform = super().get_tag()
                cross = _cross_target()
                return "py3", "none", cross[1] if cross else platform

        commands["bdist_wheel"] = AnyPythonWheel
    return commands


def _extensions() -> list[Extension]:
    if os.environ.get("PYBACKEND_SKIP_NATIVE") == "1":
        print("pybackend: PYBACKEND_SKIP_NATIVE=1, not building libtriton_python.so", flush=True)
        return []
    return [Extension(EXTENSION_NAME, sources=[])]


setup(ext_modules=_extensions(), cmdclass=_commands())
