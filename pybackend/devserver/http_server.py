"""The KServe v2 HTTP/REST endpoints tritonserver serves for inference, health, metadata,
configuration, statistics and the repository index, over the standard library's threading
HTTP server. tritonclient.http and curl talk to it as to tritonserver."""

from __future__ import annotations

import gzip
import json
import re
import threading
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Dict, Optional, Tuple

from .. import __version__
from ..utils.errors import ErrorCode
from .errors import ServeError
from .generate import NOT_ONE_RESPONSE, encode_generated, event, parse_generate
from .http_body import encode_response, error_body, parse_request
from .inference import check, infer, stream
from .log_settings import LogSettings
from .models import ServedModels, metadata, output_types
from .shm_regions import CUDA_UNSUPPORTED, Regions
from .statistics import model_statistics
from .tensors import datatype_of

SERVER_NAME = "pybackend-devserver"
EXTENSIONS = [
    "binary_tensor_data",
    "parameters",
    "model_repository",
    "model_configuration",
    "statistics",
    "system_shared_memory",
    "logging",
]

EVENT_STREAM = "text/event-stream; charset=utf-8"

_CONTROL = re.compile(r"^/v2/repository/models/(?P<name>[^/]+)/(?P<action>load|unload)$")
_SHM = re.compile(
    r"^/v2/(?P<kind>system|cuda)sharedmemory(?:/region/(?P<name>[^/]+))?"
    r"/(?P<action>status|register|unregister)$"
)
_MODEL = re.compile(r"^/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?(?P<rest>/.*)?$")


class DevHTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # Many clients open a connection per request; the default backlog of 5 refuses some.
    request_queue_size = 128

    def __init__(
        self,
        address: Tuple[str, int],
        models: ServedModels,
        regions: Regions,
        log_settings: Optional[LogSettings] = None,
    ) -> None:
        super().__init__(address, _Handler)
        self.models = models
        self.regions = regions
        self.log_settings = log_settings or LogSettings()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: tritonclient reuses its connections
    # The headers and the body go out in two writes; with Nagle's algorithm the body waits
    # for the ACK of the headers, which the client delays by ~40 ms on a kept-alive
    # connection: every request took 40+ ms.
    disable_nagle_algorithm = True
    server: DevHTTPServer

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a development server that prints every request hides the model's output

    # ------------------------------------------------------------------ routing

    def do_GET(self) -> None:  # noqa: N802 - the standard library's name
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        body = self._body()
        path = self.path.split("?", 1)[0].rstrip("/") or "/"
        try:
            try:
                route = self._route(path)
                if route is None:
                    return self._send_error(404, "Not Found")
                allowed, handler = route
                if method != allowed:
                    return self._send_error(405, "Method Not Allowed")
                handler(body)
            except ServeError as e:
                self._send_error(e.http_status, e.message)
            except OSError:
                raise
            except Exception as e:  # noqa: BLE001 - the server stays up whatever a model does
                self._send_error(500, f"{type(e).__name__}: {e}")
        except OSError:
            # The client went away (also while its request waited, as a refused one's
            # answer finds): nobody to answer, and nothing worth a traceback.
            self.close_connection = True

    def _route(self, path: str) -> Optional[Tuple[str, Callable[[bytes], None]]]:
        models = self.server.models
        if path == "/v2":
            return "GET", lambda _: self._json(
                {"name": SERVER_NAME, "version": __version__, "extensions": EXTENSIONS}
            )
        if path == "/v2/health/live":
            return "GET", lambda _: self._empty(200)
        if path == "/v2/health/ready":
            return "GET", lambda _: self._empty(200 if models.all_ready else 400)
        if path == "/v2/repository/index":
            return "POST", lambda _: self._json(models.index())
        if path == "/v2/logging":  # GET reads the settings, POST changes them
            return self.command, self._logging
        shm = _SHM.match(path)
        if shm is not None:
            return self._shm_route(shm["kind"], shm["name"] or "", shm["action"])
        control = _CONTROL.match(path)
        if control is not None:
            name, action = control["name"], control["action"]
            return "POST", lambda _: self._control(name, action)
        if path == "/v2/models/stats":
            return "GET", lambda _: self._json(model_statistics(models))
        m = _MODEL.match(path)
        if m is None:
            return None
        name, version, rest = m["name"], m["version"], m["rest"] or ""
        if rest == "":
            return "GET", lambda _: self._json(metadata(models.get(name, version)))
        if rest == "/ready":
            return "GET", lambda _: self._ready(name, version)
        if rest == "/config":
            return "GET", lambda _: self._json(models.get(name, version).config)
        if rest == "/stats":
            return "GET", lambda _: self._json(model_statistics(models, name, version))
        if rest == "/infer":
            return "POST", lambda body: self._infer(name, version, body)
        if rest in ("/generate", "/generate_stream"):
            streaming = rest == "/generate_stream"
            return "POST", lambda body: self._generate(name, version, body, streaming)
        return None

    def _shm_route(self, kind: str, name: str, action: str) -> Tuple[str, Callable[[bytes], None]]:
        if action == "status":
            return "GET", lambda _: self._shm_status(kind, name)
        return "POST", lambda body: self._shm_change(kind, name, action, body)

    # ------------------------------------------------------------------ handlers

    def _logging(self, body: bytes) -> None:
        settings = self.server.log_settings
        if self.command == "GET":
            return self._json(settings.snapshot())
        try:
            changes = json.loads(body or b"{}")
        except ValueError as e:
            raise ServeError(f"failed to parse the request JSON buffer: {e}") from None
        # Anything but an object changes nothing, as in tritonserver.
        self._json(settings.update(changes if isinstance(changes, dict) else {}))

    def _shm_status(self, kind: str, name: str) -> None:
        # No GPU here: no CUDA region was ever registered, as on a tritonserver without one.
        self._json(self.server.regions.status(name) if kind == "system" else [])

    def _shm_change(self, kind: str, name: str, action: str, body: bytes) -> None:
        regions = self.server.regions
        if action == "unregister":
            if kind == "system":
                regions.unregister(name)
            return self._empty(200)
        if kind == "cuda":
            raise ServeError(CUDA_UNSUPPORTED, ErrorCode.UNSUPPORTED)
        if not name:
            return self._send_error(404, "Not Found")
        try:
            spec = json.loads(body or b"{}")
            key, offset, size = str(spec["key"]), int(spec.get("offset", 0)), int(spec["byte_size"])
        except (ValueError, KeyError, TypeError) as e:
            raise ServeError(
                f"failed to parse the register request for region '{name}': {e}",
                ErrorCode.INVALID_ARG,
            ) from None
        regions.register(name, key, offset, size)
        self._empty(200)

    def _ready(self, name: str, version: Optional[str]) -> None:
        try:
            self.server.models.get(name, version)
        except ServeError:
            return self._send_error(400, "Model version not ready")
        self._empty(200)

    def _control(self, name: str, action: str) -> None:
        models = self.server.models
        (models.load_model if action == "load" else models.unload_model)(name)
        self._empty(200)

    def _infer(self, name: str, version: Optional[str], body: bytes) -> None:
        served = self.server.models.get(name, version)
        length = self.headers.get("Inference-Header-Content-Length")
        regions = self.server.regions
        call = parse_request(
            body, int(length) if length is not None else None, served.name, regions
        )
        outputs = infer(served, call)
        declared = output_types(served)
        datatypes = {n: datatype_of(a, declared.get(n)) for n, a in outputs.items()}
        payload, header_length = encode_response(
            served.name, int(served.version or 1), call, outputs, datatypes, regions
        )
        if header_length is None:
            return self._send(200, payload, "application/json")
        self._send(
            200,
            payload,
            "application/octet-stream",
            {"Inference-Header-Content-Length": str(header_length)},
        )

    def _generate(self, name: str, version: Optional[str], body: bytes, streaming: bool) -> None:
        """The generate extension. Errors of the inference itself are 400s, as tritonserver
        answers them here (its 200 for a model that sent other than one response to
        ``generate`` is not copied: the text is, with 400)."""
        served = self.server.models.get(name, version)
        call = parse_generate(body, served.config)
        check(served, call)
        cancel = threading.Event()  # set when the client goes away mid-stream
        answers = stream(served, call, cancel)

        def encoded(outputs: Optional[Dict[str, Any]]) -> bytes:
            return encode_generated(served.name, served.version, call.request_id, outputs or {})

        if not streaming:
            got = list(answers)
            errors = [e for _, e in got if e is not None]
            if errors:
                raise ServeError(errors[0].message, ErrorCode.INVALID_ARG)
            if len(got) != 1:
                raise ServeError(NOT_ONE_RESPONSE, ErrorCode.INVALID_ARG)
            return self._send(200, encoded(got[0][0]), "application/json")
        started = False
        try:
            for outputs, error in answers:
                if not started:  # the status goes with the first event: 400 for an error
                    self._start_chunked(200 if error is None else 400, EVENT_STREAM)
                    started = True
                if error is not None:
                    self._chunk(event(error_body(error.message)))
                    break
                self._chunk(event(encoded(outputs)))
            if not started:
                self._start_chunked(200, EVENT_STREAM)
            self._chunk(b"")  # the last chunk
        except OSError:  # the client went away: the model's is_cancelled() turns true
            cancel.set()
            self.close_connection = True

    # ------------------------------------------------------------------ I/O

    def _start_chunked(self, status: int, content_type: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _body(self) -> bytes:
        size = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(size) if size > 0 else b""
        encoding = (self.headers.get("Content-Encoding") or "").lower()
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
        return body

    def _json(self, value: Any) -> None:
        self._send(200, json.dumps(value, separators=(",", ":")).encode(), "application/json")

    def _empty(self, status: int) -> None:
        self._send(status, b"", "text/plain")

    def _send_error(self, status: int, message: str) -> None:
        self._send(status, error_body(message), "application/json")

    def _send(
        self,
        status: int,
        payload: bytes,
        content_type: str,
        extra: Optional[Dict[str, str]] = None,
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(payload)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(payload)
