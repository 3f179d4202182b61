"""Where things live: our backend library, the real tritonserver, the ORIGINAL backend.

The real server comes from the `nvidia-pytriton` wheel (installed with `--no-deps`): it
carries a tritonserver binary, its shared libraries, and NVIDIA's own Python backend with
one stub binary per Python version. We only ever look inside the wheel (importlib finds
it); importing `pytriton` itself would pull in its many dependencies.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

#: Environment variables that override discovery.
TRITONSERVER_ENV = "PYBACKEND_TRITONSERVER"
ORIG_VENV_ENV = "PYBACKEND_ORIG_VENV"
CACHE_DIR_ENV = "PYBACKEND_CACHE_DIR"

_PYTRITON_HINT = "install it with: pip install --no-deps nvidia-pytriton==0.7.0"


def package_root() -> Path:
    """The directory of the installed (or editable) `pybackend` package."""
    return Path(__file__).resolve().parent.parent


def our_backend_dir() -> Path:
    """The directory to pass as `--backend-directory`: it holds `python/libtriton_python.so`."""
    return package_root() / "backends"


def our_backend_library() -> Path:
    return our_backend_dir() / "python" / "libtriton_python.so"


def record_interpreter() -> None:
    """Name this interpreter in `python_executable` next to our library (the stubs' default
    interpreter) unless the file names one that exists.

    A wheel carries no such file (it is built elsewhere), so the first `pybackend backend-dir`
    or server start of an installed wheel writes it. Best effort: a read-only install keeps
    what it has (docker/install.sh writes it at install time).
    """
    record = our_backend_dir() / "python" / "python_executable"
    try:
        recorded = record.read_text().strip() if record.exists() else ""
        if not recorded or not os.access(recorded, os.X_OK):
            record.write_text(sys.executable + "\n")
    except OSError:
        pass


def _pytriton_root() -> Path:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(f"the nvidia-pytriton wheel is not installed; {_PYTRITON_HINT}")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def tritonserver_binary() -> Path:
    """The tritonserver executable (env PYBACKEND_TRITONSERVER overrides the wheel's)."""
    override = os.environ.get(TRITONSERVER_ENV)
    binary = Path(override) if override else _pytriton_root() / "tritonserver/bin/tritonserver"
    if not binary.is_file():
        raise FileNotFoundError(f"tritonserver not found at {binary}; {_PYTRITON_HINT}")
    return binary


def tritonserver_library_dirs() -> list[Path]:
    """Directories the wheel's tritonserver needs on LD_LIBRARY_PATH (empty if none)."""
    try:
        libs = _pytriton_root().parent / "nvidia_pytriton.libs"
    except FileNotFoundError:
        return []
    return [libs] if libs.is_dir() else []


def original_venv() -> Path:
    """The environment whose `python3` (with numpy<2) the ORIGINAL stub must find first on PATH.

    The original stub embeds libpython in isolated mode and locates site-packages through the
    first `python3` on PATH; it also breaks with numpy 2, hence a separate environment.
    """
    override = os.environ.get(ORIG_VENV_ENV)
    candidates = [Path(override)] if override else []
    candidates += [package_root().parent / ".venv-orig", Path.cwd() / ".venv-orig"]
    for venv in candidates:
        if (venv / "bin" / "python3").exists():
            return venv.resolve()
    raise FileNotFoundError(
        "the ORIGINAL backend needs a Python environment with numpy<2 for its stub; "
        f"looked in {', '.join(str(c) for c in candidates)}. Create one with `make venv-orig` "
        f"or point {ORIG_VENV_ENV} at a venv that has numpy<2."
    )


def venv_python_version(venv: Path) -> str:
    """'major.minor' of a virtual environment, read from its pyvenv.cfg (no subprocess)."""
    cfg = venv / "pyvenv.cfg"
    for line in cfg.read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() in ("version", "version_info"):
            major, minor = value.strip().split(".")[:2]
            return f"{major}.{minor}"
    raise ValueError(f"{cfg} names no Python version")


def _cache_root() -> Path:
    if os.environ.get(CACHE_DIR_ENV):
        return Path(os.environ[CACHE_DIR_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "pybackend"


def original_backend_dir(python_version: str | None = None) -> Path:
    """Assemble (once, cached) a backends directory holding the ORIGINAL Python backend.

    Layout: `<dir>/python/{libtriton_python.so, triton_python_backend_utils.py,
    triton_python_backend_stub}`, the stub matching `python_version` ('3.11'), which
    defaults to the version of `original_venv()` or else of this interpreter.
    """
    if python_version is None:
        try:
            python_version = venv_python_version(original_venv())
        except (FileNotFoundError, ValueError):
            python_version = f"{sys.version_info.major}.{sys.version_info.minor}"
    server_root = _pytriton_root() / "tritonserver"
    sources = {
        "libtriton_python.so": server_root / "backends/python/libtriton_python.so",
        "triton_python_backend_utils.py": server_root
        / "backends/python/triton_python_backend_utils.py",
        "triton_python_backend_stub": server_root
        / "python_backend_stubs"
        / python_version
        / "triton_python_backend_stub",
    }
    for path in sources.values():
        if not path.is_file():
            raise FileNotFoundError(f"the nvidia-pytriton wheel has no {path}")
    fingerprint = hashlib.sha256()
    for path in sources.values():
        stat = path.stat()
        fingerprint.update(f"{path}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    root = _cache_root()
    final = root / f"original-backend-py{python_version}-{fingerprint.hexdigest()[:16]}"
    backends = final / "backends"
    if (backends / "python" / "triton_python_backend_stub").is_file():
        return backends
    root.mkdir(parents=True, exist_ok=True)
    # Build in a scratch dir and rename, so concurrent callers never see a half-copied dir.
    scratch = Path(tempfile.mkdtemp(prefix=".original-", dir=root))
    try:
        target = scratch / "backends" / "python"
        target.mkdir(parents=True)
        for name, src in sources.items():
            shutil.copy2(src, target / name)
        (target / "triton_python_backend_stub").chmod(0o755)
        try:
            os.rename(scratch, final)
        except OSError:
            if not (backends / "python" / "triton_python_backend_stub").is_file():
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return backends
