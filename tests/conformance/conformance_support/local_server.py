"""Fallback tritonserver launcher with the interface of ``pybackend.server.TritonServer``.

Used only while ``pybackend.server`` does not exist yet (it is written in parallel);
``launcher.py`` prefers the real one. Same constructor, same attributes, same cleanup
rules: free loopback ports, every process killed and reaped on exit.
"""

from __future__ import annotations

import atexit
import os
import pathlib
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping

REPO_ROOT = pathlib.Path(__file__).resolve().parents[3]
_STUB_PYTHON = "3.11"
_original_dir_cache: pathlib.Path | None = None


def _pytriton_root() -> pathlib.Path:
    for site in sorted((REPO_ROOT / ".venv" / "lib").glob("python3*/site-packages")):
        if (site / "pytriton" / "tritonserver").is_dir():
            return site
    import importlib.util

    spec = importlib.util.find_spec("pytriton")
    if spec is None or spec.origin is None:
        raise RuntimeError("nvidia-pytriton is not installed; see docs/TEAM_BRIEF.md")
    return pathlib.Path(spec.origin).parents[1]


def tritonserver_binary() -> pathlib.Path:
    return _pytriton_root() / "pytriton" / "tritonserver" / "bin" / "tritonserver"


def _server_libs() -> pathlib.Path:
    return _pytriton_root() / "nvidia_pytriton.libs"


def original_backend_dir() -> pathlib.Path:
    """A backends dir holding the wheel's python backend and its 3.11 stub (cached)."""
    global _original_dir_cache
    if _original_dir_cache is not None and _original_dir_cache.is_dir():
        return _original_dir_cache
    wheel = _pytriton_root() / "pytriton" / "tritonserver"
    root = pathlib.Path(tempfile.mkdtemp(prefix="pb-original-backend-"))
    atexit.register(shutil.rmtree, root, True)
    target = root / "python"
    target.mkdir()
    for name in ("libtriton_python.so", "triton_python_backend_utils.py"):
        shutil.copy2(wheel / "backends" / "python" / name, target / name)
    stub = wheel / "python_backend_stubs" / _STUB_PYTHON / "triton_python_backend_stub"
    shutil.copy2(stub, target / "triton_python_backend_stub")
    _original_dir_cache = root
    return root


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class TritonServer:
    """Context manager running one tritonserver; see TEAM_BRIEF for the contract."""

    def __init__(
        self,
        model_repository: str | os.PathLike[str],
        *,
        backend: str = "ours",
        extra_args: Iterable[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout: float = 60.0,
        model_control_mode: str | None = None,
        load_models: Iterable[str] = (),
        backend_config: Iterable[str] = (),
    ) -> None:
        self.model_repository = pathlib.Path(model_repository)
        self.backend = backend
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.model_control_mode = model_control_mode
        self.load_models = list(load_models)
        self.backend_config = list(backend_config)
        self.http_url = self.grpc_url = self.metrics_url = ""
        self.pid = -1
        self._proc: subprocess.Popen[bytes] | None = None
        self._log_path: pathlib.Path | None = None
        self._final_log: str | None = None

    def _backend_dir(self) -> pathlib.Path:
        if self.backend == "original":
            return original_backend_dir()
        if self.backend == "ours":
            return REPO_ROOT / "pybackend" / "backends"
        return pathlib.Path(self.backend)

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(_server_libs()), env.get("LD_LIBRARY_PATH", "")) if p
        )
        # The original stub finds its site-packages through the first python3 on PATH.
        venv = REPO_ROOT / (".venv-orig" if self.backend == "original" else ".venv")
        env["PATH"] = os.pathsep.join([str(venv / "bin"), env.get("PATH", "")])
        env.update(self.env)
        return env

    def __enter__(self) -> TritonServer:
        http, grpc, metrics = _free_port(), _free_port(), _free_port()
        self.http_url = f"127.0.0.1:{http}"
        self.grpc_url = f"127.0.0.1:{grpc}"
        self.metrics_url = f"http://127.0.0.1:{metrics}/metrics"
        args = [
            str(tritonserver_binary()),
            f"--model-repository={self.model_repository}",
            f"--backend-directory={self._backend_dir()}",
            "--http-address=127.0.0.1",
            f"--http-port={http}",
            "--grpc-address=127.0.0.1",
            f"--grpc-port={grpc}",
            "--metrics-address=127.0.0.1",
            f"--metrics-port={metrics}",
            "--exit-timeout-secs=10",
        ]
        if self.model_control_mode:
            args.append(f"--model-control-mode={self.model_control_mode}")
        args += [f"--load-model={name}" for name in self.load_models]
        args += [f"--backend-config=python,{item}" for item in self.backend_config]
        args += self.extra_args
        log_dir = pathlib.Path(tempfile.mkdtemp(prefix="pb-triton-log-"))
        self._log_path = log_dir / "server.log"
        with open(self._log_path, "wb") as log:
            self._proc = subprocess.Popen(
                args,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self._environment(),
                # A neutral cwd: the original stub puts its cwd on sys.path, and the repo
                # root holds OUR triton_python_backend_utils.py, which it must not import.
                cwd=log_dir,
                start_new_session=True,
            )
        self.pid = self._proc.pid
        try:
            self.wait_ready(self.ready_timeout)
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        url = f"http://{self.http_url}/v2/health/live"
        while time.monotonic() < deadline:
            if not self.is_alive():
                raise RuntimeError(f"tritonserver exited early:\n{self.log_text()[-4000:]}")
            try:
                with urllib.request.urlopen(url, timeout=1) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            time.sleep(0.1)
        raise TimeoutError(f"tritonserver not live after {timeout}s:\n{self.log_text()[-4000:]}")

    def log_text(self) -> str:
        if self._final_log is not None:
            return self._final_log
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(errors="replace")

    def __exit__(self, *exc: object) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            # The whole session: stub processes must not outlive the server.
            _signal_group(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                _signal_group(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        if proc is not None:
            _signal_group(proc.pid, signal.SIGKILL)
        if self._log_path is not None:
            self._final_log = self.log_text()
            keep = os.environ.get("PYBACKEND_TEST_KEEP_LOGS")
            if keep:
                shutil.copy2(self._log_path, pathlib.Path(keep) / f"server-{self.pid}.log")
            shutil.rmtree(self._log_path.parent, ignore_errors=True)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


if __name__ == "__main__":  # manual smoke run: python local_server.py <repo> [backend]
    with TritonServer(sys.argv[1], backend=sys.argv[2] if len(sys.argv) > 2 else "ours") as s:
        print(s.http_url, s.grpc_url, s.metrics_url, flush=True)
        time.sleep(3600)
