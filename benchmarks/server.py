"""A lean tritonserver launcher for the benchmark.

Why not `pybackend.server.TritonServer`: the benchmark times server start to READY to the
millisecond (it polls every 2 ms, the launcher every 100 ms), and the native floor's backend
directory holds no `python/` backend, which that launcher insists on. It reuses the
launcher's discovery and process helpers so both start the same binary the same way.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from benchmarks import procinfo
from pybackend.server import locate
from pybackend.server.processes import descendants, free_ports, killpg_quietly, wait_gone


class ServerFailed(RuntimeError):
    pass


class BenchServer:
    """One tritonserver process for one backend kind ("original", "ours" or "native")."""

    def __init__(
        self,
        kind: str,
        repo: Path,
        backend_dir: Path,
        *,
        strict: bool = True,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        prefix: Sequence[str] = (),
    ) -> None:
        """``args``: more tritonserver options; ``env``: more environment for it; ``prefix``:
        a command that runs tritonserver (``valgrind --tool=callgrind ...``)."""
        self.kind = kind
        self.args = list(args)
        self.prefix = list(prefix)
        self.extra_env = dict(env or {})
        self.repo = repo
        self.backend_dir = backend_dir
        self.strict = strict
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(prefix=f"bench-{kind}-", suffix=".log")
        self._conn: http.client.HTTPConnection | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _env(self) -> dict[str, str]:
        env = {**os.environ, **self.extra_env}
        libs = [str(p) for p in locate.tritonserver_library_dirs()]
        env["LD_LIBRARY_PATH"] = os.pathsep.join(libs + [env.get("LD_LIBRARY_PATH", "")])
        if self.kind == "original":  # its stub finds numpy<2 through the first python3
            env["PATH"] = f"{locate.original_venv() / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def start(self, timeout: float = 120.0) -> float:
        """Start and wait for /v2/health/ready; return the seconds it took."""
        (self.port,) = free_ports(1)
        cmd = [
            *self.prefix,
            str(locate.tritonserver_binary()),
            f"--model-repository={self.repo}",
            f"--backend-directory={self.backend_dir}",
            "--http-address=127.0.0.1",
            f"--http-port={self.port}",
            "--allow-grpc=false",
            "--allow-metrics=false",
            "--exit-timeout-secs=5",
            f"--strict-readiness={str(self.strict).lower()}",
            "--exit-on-error=false",
            *self.args,
        ]
        if self.kind == "ours":
            # Experiments with our backend's options, e.g. "ipc-spin-us=50,inline-threshold=0".
            extra = os.environ.get("PYBACKEND_BENCH_OURS_CONFIG", "")
            cmd += [f"--backend-config=python,{kv}" for kv in extra.split(",") if kv]
        return self.launch(
            cmd,
            self._probe_ready,
            timeout,
            0.002,
            env=self._env(),
            start_new_session=True,
            # Not the checkout: the original stub puts its cwd on sys.path and would import
            # our triton_python_backend_utils.py instead of its own.
            cwd=self.repo.parent,
        )

    def launch(
        self,
        cmd: list[str],
        ready: Callable[[], bool],
        timeout: float,
        poll_s: float,
        **popen: Any,
    ) -> float:
        """Start ``cmd`` (its output into the log) and poll ``ready()`` every ``poll_s``;
        return the seconds until it was ready, or raise ServerFailed with the log's tail when
        the process exits or ``timeout`` passes first."""
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT, **popen
        )
        while True:
            if self.proc.poll() is not None:
                raise ServerFailed(f"{self.kind} {Path(cmd[0]).name} exited:\n{self.log_tail()}")
            if ready():
                return time.perf_counter() - t0
            if time.perf_counter() - t0 > timeout:
                raise ServerFailed(
                    f"{self.kind} {Path(cmd[0]).name} not ready in {timeout} s:\n{self.log_tail()}"
                )
            time.sleep(poll_s)

    def _probe_ready(self) -> bool:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1.0)
        try:
            conn.request("GET", "/v2/health/ready")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    def _request(self, method: str, path: str, body: bytes | None = None) -> tuple[int, bytes]:
        """One control request on a kept-alive connection (reconnects once if it dropped)."""
        for attempt in range(2):
            if self._conn is None:
                self._conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60.0)
            try:
                self._conn.request(method, path, body=body)
                resp = self._conn.getresponse()
                return resp.status, resp.read()
            except (OSError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def model_states(self) -> dict[str, tuple[str, str]]:
        status, body = self._request("POST", "/v2/repository/index", b"{}")
        if status != 200:
            raise ServerFailed(f"repository index failed: {body[:200]!r}")
        return {m["name"]: (m.get("state", ""), m.get("reason", "")) for m in json.loads(body)}

    def wait_models(self, names: list[str], timeout: float) -> dict[str, str | None]:
        """Wait until every model has settled; name -> None (ready) or why it is not."""
        deadline = time.monotonic() + timeout
        while True:
            states = self.model_states()
            pending = [n for n in names if states.get(n, ("",))[0] in ("", "LOADING")]
            if not pending or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        result: dict[str, str | None] = {}
        for name in names:
            state, reason = states.get(name, ("", "never appeared"))
            result[name] = None if state == "READY" else (reason or state or "not loaded")
        return result

    @staticmethod
    def backend_ns_of(inference_stats: dict) -> int:
        """Triton's backend time in a model's inference_stats: compute_input + compute_infer +
        compute_output ns (what every table here calls backend time)."""
        return sum(
            inference_stats[k]["ns"] for k in ("compute_input", "compute_infer", "compute_output")
        )

    def stats(self, model: str) -> dict[str, int]:
        """Cumulative inference stats: request count and the three backend-time sums (ns)."""
        status, body = self._request("GET", f"/v2/models/{model}/stats")
        if status != 200:
            return {"count": 0, "backend_ns": 0}
        inf = json.loads(body)["model_stats"][0]["inference_stats"]
        return {"count": inf["success"]["count"], "backend_ns": self.backend_ns_of(inf)}

    def stubs(self, models: list[str]) -> dict[int, str | None]:
        """Child processes of the server and the model each serves (None: not a stub)."""
        found = {}
        for pid in descendants(self.pid):
            inst = procinfo.instance_name(pid)
            found[pid] = procinfo.model_of_instance(inst, models) if inst else None
        return found

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = Path(self._log.name).read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        if self.proc is None:
            return
        tree = descendants(self.proc.pid) if self.proc.poll() is None else set()
        # The server maps every region it created, even for a stub that crashed; a region
        # still there after the stop would be left behind in /dev/shm (the original's).
        regions = procinfo.dev_shm_paths([self.proc.pid, *tree])
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                killpg_quietly(self.proc.pid)
                self.proc.wait()
        if wait_gone(tree, 3.0):
            killpg_quietly(self.proc.pid)
            wait_gone(tree, 3.0)
        for path in regions:
            Path(path).unlink(missing_ok=True)
        self._log.close()
        self.proc = None

    def __enter__(self) -> BenchServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
