""":class:`DevServer`: a model repository's Python models behind tritonserver's HTTP (and,
where grpcio is installed, gRPC) endpoints, in this Python environment, with no
tritonserver binary and no container. For development: one instance per model; the metrics
endpoint shows the models' custom metrics only (docs/devserver.md)."""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, List, Optional, Tuple, Union

from .errors import ServeError
from .http_server import DevHTTPServer
from .log_settings import LogSettings
from .metrics import MetricsServer, exposition, sources
from .models import ServedModels
from .shm_regions import Regions

RELOAD_POLL_S = 0.5  # how often --reload looks at the model directories
ECHO_POLL_S = 0.2  # how often the models' new log lines are shown
ECHO_JOIN_S = 5.0  # how long close() waits for the last pass of the log lines
LEVELS = {0: "I", 1: "W", 2: "E", 3: "V"}  # pb_utils.Logger levels, as the server's log marks them


class DevServer:
    """Loads the models, then serves them on ``host``: HTTP on ``http_port``, gRPC on
    ``grpc_port`` and the models' custom metrics on ``metrics_port`` (``/metrics``; 0: a
    free port; ``None``: not served). A context manager;
    ``in_process=True`` runs model.py in this process (``breakpoint()`` works), else each
    model runs in a stub process of its own, as under tritonserver; ``reload=True`` loads
    a model again when a file in its directory changes."""

    def __init__(
        self,
        model_repository: Union[str, Path],
        *,
        host: str = "127.0.0.1",
        http_port: int = 0,
        grpc_port: Optional[int] = None,
        metrics_port: Optional[int] = None,
        in_process: bool = False,
        echo_logs: bool = True,
        reload: bool = False,
        log_verbose: int = 0,
    ) -> None:
        self.models = ServedModels(model_repository, in_process=in_process)
        #: The clients' registered system shared memory (both protocols share them).
        self.regions = Regions()
        # /v2/logging; also which model logs are shown (tritonserver's --log-verbose)
        self.log_settings = LogSettings()
        self.log_settings.update({"log_verbose_level": log_verbose})
        self.host = host
        self._ports = (http_port, grpc_port)
        self._metrics_port = metrics_port
        self.metrics: Optional[MetricsServer] = None
        self._metrics_serving = False
        self.echo_logs = echo_logs
        self.reload = reload
        self.http: Optional[DevHTTPServer] = None
        self.grpc: Any = None
        self.grpc_port: Optional[int] = None
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()
        self._serving = False

    @property
    def http_port(self) -> int:
        return self.http.server_address[1] if self.http is not None else 0

    @property
    def http_url(self) -> str:
        """``host:port``, as tritonclient takes it."""
        return f"{self.host}:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"{self.host}:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        """The metrics endpoint's URL (``http://host:port/metrics``)."""
        port = self.metrics.server_address[1] if self.metrics is not None else 0
        return f"http://{self.host}:{port}/metrics"

    def __enter__(self) -> "DevServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> "DevServer":
        try:
            self.models.load()
            http_port, grpc_port = self._ports
            self.http = DevHTTPServer(
                (self.host, http_port), self.models, self.regions, self.log_settings
            )
            if grpc_port is not None:
                from .grpc_service import start_grpc

                self.grpc, self.grpc_port = start_grpc(
                    self.models, self.regions, self.host, grpc_port, self.log_settings
                )
            if self._metrics_port is not None:
                self.metrics = MetricsServer((self.host, self._metrics_port), self.metrics_text)
                self._thread(self.metrics.serve_forever, "devserver-metrics")
                self._metrics_serving = True
            if self.echo_logs:
                self._thread(self._echo, "devserver-logs")
            if self.reload:
                self._thread(self._watch, "devserver-reload")
            # HTTP last: once its health endpoint answers, everything else is up.
            self._thread(self.http.serve_forever, "devserver-http")
            self._serving = True
        except BaseException:
            self.close()
            raise
        return self

    def _thread(self, target: Any, name: str) -> None:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def close(self) -> None:
        """Stop serving, then finalize every model."""
        self._stop.set()
        if self.http is not None:
            if self._serving:  # shutdown() waits for a loop that never started otherwise
                self.http.shutdown()
                self._serving = False
            self.http.server_close()
            self.http = None
        if self.grpc is not None:
            self.grpc.stop(grace=1.0).wait()
            self.grpc = None
        if self.metrics is not None:
            if self._metrics_serving:  # as for HTTP: shutdown() needs a started loop
                self.metrics.shutdown()
                self._metrics_serving = False
            self.metrics.server_close()
            self.metrics = None
        for thread in self._threads:
            if thread.name == "devserver-logs":
                thread.join(ECHO_JOIN_S)  # its last pass shows what came before the stop
        instances = self._instances() if self.echo_logs else []
        self.models.close()  # finalize
        for served, index, label, model in instances:  # what finalize logged and printed
            _echo_new(served.shown.setdefault(index, [0, 0]), label, model, self.log_settings)
        self.regions.close()

    def metrics_text(self) -> str:
        """The models' custom metrics, as the metrics endpoint answers."""
        served = list(self.models.models.values())
        return exposition(sources(m for s in served for m in list(s.instances)))

    def wait(self) -> None:
        """Block until :meth:`close` (from another thread) or Ctrl-C."""
        while not self._stop.wait(0.5):
            pass

    def _watch(self) -> None:
        """``reload``: a model whose files changed is loaded again (its model.py re-read,
        ``initialize`` run again), as a load request would do."""
        while not self._stop.wait(RELOAD_POLL_S):
            for name in self.models.changed():
                print(f"pybackend devserver: {name} changed, reloading", file=sys.stderr)
                try:
                    self.models.load_model(name)
                except ServeError as e:
                    print(f"pybackend devserver: {e.message}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ model output

    def _echo(self) -> None:
        """The models' ``pb_utils.Logger`` records and (stub processes) their stdout and
        stderr lines, on this process's stderr with the model's name; once more after the
        stop, for the lines of its last moments (close() shows finalize's)."""
        while True:
            stopped = self._stop.wait(ECHO_POLL_S)
            for served, index, label, model in self._instances():
                _echo_new(served.shown.setdefault(index, [0, 0]), label, model, self.log_settings)
            if stopped:
                return

    def _instances(self) -> List[Tuple[Any, int, str, Any]]:
        """(served model, index, label, instance) of every running instance."""
        out = []
        for served in list(self.models.models.values()):
            instances = list(served.instances)  # once: a reload may take them meanwhile
            for index, model in enumerate(instances):
                label = served.name if len(instances) == 1 else model.instance_name
                out.append((served, index, label, model))
        return out


def _echo_new(shown: List[int], label: str, model: Any, settings: LogSettings) -> None:
    """What ``model`` logged (the records ``settings`` lets through) and printed since
    ``shown`` (records, lines) was counted."""
    logs = list(model.logs)
    for record in logs[shown[0] :]:
        if not settings.shows(record.level):
            continue
        level = LEVELS.get(record.level, "I")
        where = f"{Path(record.filename).name}:{record.line}"
        print(f"{level} [{label}] {where}: {record.message}", file=sys.stderr, flush=True)
    shown[0] = len(logs)
    lines = list(getattr(model, "output", []))
    for line in lines[shown[1] :]:
        print(f"[{label}] {line}", file=sys.stderr, flush=True)
    shown[1] = len(lines)


def serve(
    model_repository: Union[str, Path],
    *,
    host: str = "127.0.0.1",
    http_port: int = 8000,
    grpc_port: Optional[int] = 8001,
    metrics_port: Optional[int] = 8002,
    in_process: bool = False,
    reload: bool = False,
    log_verbose: int = 0,
) -> None:
    """Serve ``model_repository`` until Ctrl-C (UV-42): tritonserver's HTTP and gRPC
    endpoints for its Python models, and their custom metrics, in this environment."""
    server = DevServer(
        model_repository, host=host, http_port=http_port, grpc_port=grpc_port,
        metrics_port=metrics_port, in_process=in_process, reload=reload,
        log_verbose=log_verbose,
    )  # fmt: skip
    try:
        server.start()
        _banner(server)
        server.wait()
    except KeyboardInterrupt:
        pass  # Ctrl-C: stop serving, finalize the models
    finally:
        server.close()


def _banner(server: DevServer) -> None:
    """The endpoints and every model with its state, as the server starts serving."""
    lines = [
        f"pybackend devserver: {len(server.models.models)} model(s), HTTP on "
        f"{server.http_url}"
        + (f", gRPC on {server.grpc_url}" if server.grpc else "")
        + (f", metrics on {server.metrics_url}" if server.metrics else "")
    ]
    for entry in server.models.index():
        why = f": {entry['reason']}" if entry.get("reason") else ""
        lines.append(
            f"  {entry['name']} (version {entry.get('version', '-')}) {entry['state']}{why}"
        )
    print("\n".join(lines), file=sys.stderr, flush=True)
