"""Launch a real tritonserver on loopback ports, wait until ready, and stop it without leftovers.

Used by the test suite, the benchmarks and `pybackend serve`. The server runs in its own
process group (session) so that stopping it also takes every stub process it started.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Union

from pybackend.errors import PybackendError
from pybackend.server import locate
from pybackend.server.addresses import (
    bare,
    joined,
    local,
    triton_grpc_address,
    triton_http_address,
)
from pybackend.server.http_call import http_call
from pybackend.server.processes import (
    alive,
    descendants,
    free_ports,
    kill_quietly,
    killpg_quietly,
    same_processes,
    start_time,
    wait_gone,
)
from pybackend.server.unload import UNLOAD_WAIT_S, unload_models

BackendConfig = Union[str, tuple[str, str]]

#: How many times to retry when a freshly picked port was taken in the meantime.
_PORT_RETRIES = 3
_PORT_CLASH_MARKERS = ("address already in use", "failed to bind", "failed to listen")

#: tritonserver's CPU/GPU metrics thread sleeps this long between polls, and its shutdown
#: waits for the sleep to end: Triton's default (2000 ms) adds about a second to every stop.
#: A launcher's servers are short-lived (tests, benchmarks), so they poll more often;
#: `pybackend serve` keeps Triton's default (metrics_interval_ms=None).
QUICK_METRICS_INTERVAL_MS = 100


class ServerError(PybackendError, RuntimeError):
    """tritonserver could not be started, or died before it became ready."""


@functools.lru_cache(maxsize=None)
def _supported_options(program: tuple[str, ...], env_key: str) -> frozenset[str]:
    """The `--options` this tritonserver build understands (parsed from `--help`)."""
    env = dict(os.environ, LD_LIBRARY_PATH=env_key)
    try:
        result = subprocess.run(
            [*program, "--help"], capture_output=True, text=True, timeout=30, env=env, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return frozenset()
    words = (result.stdout + result.stderr).split()
    return frozenset(w for w in words if w.startswith("--"))


def _describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"signal {signal.Signals(-code).name}"
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


def _tail(text: str, lines: int = 60) -> str:
    return "\n".join(text.splitlines()[-lines:])


def _tied_to_this_process(command: list[str]) -> list[str]:
    """``command`` run so that the server gets SIGTERM when this process dies, however it
    dies (a launcher killed with SIGKILL left tritonserver and its stubs running, holding
    their ports): util-linux's ``setpriv --pdeathsig`` sets the death signal, which
    survives its exec of the server. Only from the main thread: the kernel sends it when
    the *thread* that started the child ends, and a worker thread may end long before this
    process does. Without setpriv the server is not tied (stop() and the finalizer still
    stop it on every ordinary exit)."""
    setpriv = shutil.which("setpriv")
    if setpriv is None or threading.current_thread() is not threading.main_thread():
        return command
    return [setpriv, "--pdeathsig", "TERM", "--", *command]


def _emergency_kill(pid: int) -> None:
    """Last resort (garbage collection or interpreter exit without stop()): kill the group."""
    killpg_quietly(pid)
    kill_quietly(pid)


class TritonServer:
    """A tritonserver process serving `model_repository`; a context manager.

    `backend` is "ours" (this package's library), "original" (NVIDIA's Python backend
    from the nvidia-pytriton wheel, with `.venv-orig/bin` first on PATH for its stub) or a
    path to a backends directory (one holding `python/libtriton_python.so`).
    `runtimes`: python-based backends served beside it, by name (a model whose config says
    `backend: "<name>"` runs `<directory>/model.py`; docs/python_based_backends.md): the
    server gets a backends directory of its own making, `python` and each runtime linked in.
    Ports default to free loopback ports chosen at start. `metrics_interval_ms`: how often
    the server polls CPU/GPU metrics (None: Triton's default, 2000 ms); a stop waits up to
    one interval, hence the short default.
    """

    #: Unload an explicit-mode server's models before its SIGTERM (a subclass whose server's
    #: repository API is not the launcher's to drive turns it off).
    unload_before_stop = True

    def __init__(
        self,
        model_repository: str | os.PathLike[str],
        *,
        backend: str | os.PathLike[str] = "ours",
        extra_args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        ready_timeout: float = 60.0,
        model_control_mode: str | None = None,
        load_models: Iterable[str] = (),
        backend_config: Iterable[BackendConfig] = (),
        host: str = "127.0.0.1",
        http_port: int | None = None,
        grpc_port: int | None = None,
        metrics_port: int | None = None,
        stop_timeout: float = 30.0,
        runtimes: Mapping[str, str | os.PathLike[str]] | None = None,
        metrics_interval_ms: int | None = QUICK_METRICS_INTERVAL_MS,
    ) -> None:
        self.model_repository = Path(model_repository).resolve()
        if not self.model_repository.is_dir():
            raise FileNotFoundError(f"model repository {self.model_repository} does not exist")
        self.backend = str(backend)
        self.extra_args = list(extra_args)
        self.env = dict(env or {})
        self.ready_timeout = ready_timeout
        self.model_control_mode = model_control_mode
        self.load_models = list(load_models)
        self.backend_config = [_backend_config_arg(item) for item in backend_config]
        self.host = bare(host)  # [::1] as a URL writes it, or ::1
        self._requested_ports = (http_port, grpc_port, metrics_port)
        self.stop_timeout = stop_timeout
        self.metrics_interval_ms = metrics_interval_ms
        self.backend_dir = self._resolve_backend_dir()
        self.runtimes = {name: Path(path).resolve() for name, path in (runtimes or {}).items()}
        for name, path in self.runtimes.items():
            if name == "python" or not (path / "model.py").is_file():
                raise FileNotFoundError(
                    f"runtime '{name}': {path} holds no model.py (a python-based backend's "
                    "directory, named other than python)"
                )
        self.http_port = self.grpc_port = self.metrics_port = 0
        self.command: list[str] = []
        #: pids that outlived the server process and had to be killed at stop().
        self.killed_stragglers: set[int] = set()
        self.returncode: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._workdir: Path | None = None
        self._tree: dict[int, int | None] = {}  # pid -> start time
        self._log_path: Path | None = None
        self._final_log: str | None = None
        self._finalizer: weakref.finalize | None = None
        self._served = False  # became ready through its own HTTP endpoint (stop() unloads)

    # ----------------------------------------------------------------- addresses
    @property
    def _client_host(self) -> str:
        return local(self.host)

    @property
    def http_url(self) -> str:
        return joined(self._client_host, self.http_port)

    @property
    def grpc_url(self) -> str:
        return joined(self._client_host, self.grpc_port)

    @property
    def metrics_url(self) -> str:
        return f"http://{joined(self._client_host, self.metrics_port)}/metrics"

    @property
    def pid(self) -> int:
        if self._proc is None:
            raise RuntimeError("tritonserver is not started")
        return self._proc.pid

    # ----------------------------------------------------------------- lifecycle
    def __enter__(self) -> TritonServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> TritonServer:
        """Start the server and wait (bounded by ready_timeout) until it reports ready."""
        if self._proc is not None:
            raise RuntimeError("this TritonServer was already started")
        auto_ports = None in self._requested_ports
        for attempt in range(_PORT_RETRIES):
            self._launch()
            try:
                self.wait_ready(self.ready_timeout)
                self._served = True
                # Remember the stubs now: if the server dies first, they are orphans that
                # stop() must still find.
                self._tree = {pid: start_time(pid) for pid in descendants(self.pid)}
                return self
            except ServerError:
                clash = any(m in self.log_text().lower() for m in _PORT_CLASH_MARKERS)
                self.stop()
                if not (auto_ports and clash and attempt + 1 < _PORT_RETRIES):
                    raise
                self._proc, self._final_log = None, None
            except BaseException:
                self.stop()
                raise
        raise AssertionError("unreachable")

    def _launch(self) -> None:
        picked = iter(free_ports(3, self._client_host))
        self.http_port, self.grpc_port, self.metrics_port = (
            port if port else next(picked) for port in self._requested_ports
        )
        env = self._environment()
        # A private working directory: the server and its stubs must not pick up modules
        # from wherever the caller happens to run (the original stub imports from its cwd).
        self._workdir = Path(tempfile.mkdtemp(prefix="tritonserver-"))
        self.command = self._build_command(env["LD_LIBRARY_PATH"])
        self._log_path = self._workdir / "tritonserver.log"
        fd = os.open(self._log_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            self._proc = subprocess.Popen(
                _tied_to_this_process(self.command),
                stdin=subprocess.DEVNULL,
                stdout=fd,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=self._workdir,
                start_new_session=True,  # own process group: stop() takes the stubs too
            )
        finally:
            os.close(fd)
        self._finalizer = weakref.finalize(self, _emergency_kill, self._proc.pid)

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after stop_timeout; kill and reap every descendant. An
        explicit-mode server's models are unloaded first (bounded): its shutdown is then
        immediate instead of a second or more (pybackend.server.unload)."""
        proc = self._proc
        if proc is None or self._final_log is not None:
            return self.returncode
        tree = {pid for pid in same_processes(self._tree) if alive(pid)}
        if proc.poll() is None:
            tree |= descendants(proc.pid)
            self._unload_models()
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(self.stop_timeout)
            except subprocess.TimeoutExpired:
                killpg_quietly(proc.pid)
                proc.kill()
                proc.wait()
        # Stubs normally exit with the server; give stragglers a moment, then kill them.
        self.killed_stragglers = wait_gone(tree, 2.0)
        killpg_quietly(proc.pid)
        for pid in self.killed_stragglers:
            kill_quietly(pid)
        wait_gone(tree, 5.0)
        self.returncode = proc.returncode
        if self._finalizer is not None:
            self._finalizer.detach()
        self._final_log = self._read_log()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
        return self.returncode

    def _unload_models(self) -> None:
        """An explicit-mode server's models unloaded before its SIGTERM (bounded, best
        effort: pybackend.server.unload), only where its HTTP endpoint is known to be its
        own: it became ready through it, and no option turned HTTP off."""
        http_off = any(
            a.lower() in ("--allow-http=false", "--allow-http=0") for a in self.extra_args
        )
        explicit = self.model_control_mode == "explicit"
        if explicit and self.unload_before_stop and self._served and not http_off:
            wait = min(UNLOAD_WAIT_S, self.stop_timeout / 4)
            unload_models(self._client_host, self.http_port, wait)

    # ----------------------------------------------------------------- state
    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and alive(self._proc.pid)

    def is_ready(self) -> bool:
        """One probe of /v2/health/ready."""
        return self._http_status("/v2/health/ready") == 200

    def wait_ready(self, timeout: float) -> None:
        """Return once /v2/health/ready answers 200; raise if the server dies or times out."""
        if self._proc is None:
            raise RuntimeError("tritonserver is not started")
        deadline = time.monotonic() + timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                raise ServerError(
                    f"tritonserver exited ({_describe_exit(code)}) before it became ready.\n"
                    f"command: {' '.join(self.command)}\n--- log tail ---\n"
                    f"{_tail(self.log_text())}"
                )
            if self.is_ready():
                return
            if time.monotonic() > deadline:
                raise ServerError(
                    f"tritonserver was not ready after {timeout:.0f} s.\n"
                    f"command: {' '.join(self.command)}\n--- log tail ---\n"
                    f"{_tail(self.log_text())}"
                )
            time.sleep(0.1)

    def log_text(self) -> str:
        """The server's output so far (stdout and stderr interleaved)."""
        if self._final_log is not None:
            return self._final_log
        return self._read_log()

    # ----------------------------------------------------------------- internals
    def _read_log(self) -> str:
        if self._log_path is None:
            return ""
        try:
            return self._log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _http_status(self, path: str) -> int | None:
        return http_status(self._client_host, self.http_port, path, timeout=2.0)

    def _resolve_backend_dir(self) -> Path:
        if self.backend == "ours":
            library = locate.our_backend_library()
            if not library.is_file():
                raise FileNotFoundError(
                    f"our backend library {library} is not built; run `pip install -e .` "
                    "(or `make build`) in the pybackend checkout"
                )
            locate.record_interpreter()
            return locate.our_backend_dir()
        if self.backend == "original":
            locate.original_venv()  # fail early, before the server starts, if it is missing
            return locate.original_backend_dir()
        path = Path(self.backend).resolve()
        if not (path / "python" / "libtriton_python.so").is_file():
            raise FileNotFoundError(f"{path} holds no python/libtriton_python.so")
        return path

    def _backends(self) -> Path:
        """The directory tritonserver takes backends from: the selected one's, or with
        runtimes one in the working directory linking it (as `python`) and them."""
        if not self.runtimes or self._workdir is None:
            return self.backend_dir
        backends = self._workdir / "backends"
        backends.mkdir()
        (backends / "python").symlink_to(self.backend_dir / "python", target_is_directory=True)
        for name, path in self.runtimes.items():
            (backends / name).symlink_to(path, target_is_directory=True)
        return backends

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.env)
        libs = [str(p) for p in locate.tritonserver_library_dirs()]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            libs + [p for p in env.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p]
        )
        if self.backend == "original":
            orig_bin = str(locate.original_venv() / "bin")
            env["PATH"] = os.pathsep.join([orig_bin, env.get("PATH", os.defpath)])
        return env

    def _program(self) -> list[str]:
        """What runs tritonserver: the wheel's binary (a subclass may run another build, or
        one under an emulator: tests/platforms)."""
        return [str(locate.tritonserver_binary())]

    def _build_command(self, ld_library_path: str) -> list[str]:
        program = self._program()
        options = _supported_options(tuple(program), ld_library_path)
        given = {arg.split("=", 1)[0] for arg in self.extra_args if arg.startswith("--")}
        cmd = [
            *program,
            f"--model-repository={self.model_repository}",
            f"--backend-directory={self._backends()}",
            f"--http-address={triton_http_address(self.host)}",
            f"--http-port={self.http_port}",
            f"--grpc-address={triton_grpc_address(self.host)}",
            f"--grpc-port={self.grpc_port}",
            "--allow-metrics=true",
            f"--metrics-port={self.metrics_port}",
        ]
        if "--metrics-address" in options:
            cmd.append(f"--metrics-address={triton_http_address(self.host)}")
        if "--exit-timeout-secs" not in given:
            # Bounded shutdown: in-flight requests get this long before the server gives up.
            cmd.append(f"--exit-timeout-secs={max(1, int(self.stop_timeout / 2))}")
        if self.metrics_interval_ms is not None and "--metrics-interval-ms" not in given:
            cmd.append(f"--metrics-interval-ms={self.metrics_interval_ms}")
        if self.model_control_mode:
            cmd.append(f"--model-control-mode={self.model_control_mode}")
        cmd += [f"--load-model={name}" for name in self.load_models]
        cmd += [f"--backend-config={arg}" for arg in self.backend_config]
        cmd += self.extra_args
        return cmd

    def __repr__(self) -> str:
        state = "running" if self.is_alive() else "stopped"
        return f"TritonServer({str(self.model_repository)!r}, backend={self.backend!r}, {state})"


def _backend_config_arg(item: BackendConfig) -> str:
    """'key=value' -> 'python,key=value'; 'name,key=value' and (key, value) are accepted too."""
    if isinstance(item, tuple):
        key, value = item
        return f"python,{key}={value}"
    head = item.split("=", 1)[0]
    return item if "," in head else f"python,{item}"


def http_status(host: str, port: int, path: str, timeout: float) -> int | None:
    """The HTTP status of GET ``path`` at ``host:port``; None when nothing answers."""
    answer = http_call(host, port, "GET", path, timeout=timeout)
    return None if answer is None else answer[0]
