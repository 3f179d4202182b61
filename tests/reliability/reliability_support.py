"""Helpers for the reliability tests: find a server's stubs, drive the chaos models, watch
the log, read what a process has mapped."""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from pybackend.server import TritonServer
from pybackend.server.processes import alive, descendants

MODELS = Path(__file__).resolve().parent / "models"
T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T], timeout: float = 30.0, every: float = 0.05) -> T:
    """Poll probe() until it returns something truthy; fail with `what` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(every)


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def stubs(server: TritonServer, model: str | None = None) -> dict[str, int]:
    """Live stub processes of the server: instance name -> pid (optionally of one model)."""
    found = {}
    for pid in descendants(server.pid):
        m = re.search(r"pybackend\.stub --instance (\S+)", cmdline(pid))
        if not m or not alive(pid):
            continue
        if model is None or re.fullmatch(re.escape(model) + r"_\d+(_\d+)*", m.group(1)):
            found[m.group(1)] = pid
    return found


def infer(client: Any, model: str, cmd: str, **kwargs: Any) -> int:
    """Send CMD to a chaos-style model over HTTP; returns the PID output."""
    import tritonclient.http as httpclient

    inp = httpclient.InferInput("CMD", [1], "BYTES")
    inp.set_data_from_numpy(np.array([cmd.encode()], dtype=np.object_))
    result = client.infer(model, [inp], **kwargs)
    return int(result.as_numpy("PID")[0])


class LogWatch:
    """Waits for lines that appear in the server log after the watch was made."""

    def __init__(self, server: TritonServer) -> None:
        self.server = server
        self.start = len(server.log_text())

    def text(self) -> str:
        return self.server.log_text()[self.start :]

    def wait(self, needle: str, timeout: float = 30.0) -> str:
        return wait_for(
            f"{needle!r} in the server log", lambda: needle in self.text() and self.text(), timeout
        )


def memfd_mappings(pid: int) -> dict[str, int]:
    """memfd-backed mappings of pid: '<name> @ <start>' -> size in bytes."""
    found = {}
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        if "/memfd:" not in line:
            continue
        span, rest = line.split(None, 1)
        lo, hi = (int(x, 16) for x in span.split("-"))
        name = rest.split("/memfd:", 1)[1].replace(" (deleted)", "")
        found[f"{name} @ {lo:x}"] = hi - lo
    return found


def memfd_files(pids: list[int]) -> dict[tuple[int, int], tuple[str, int]]:
    """The distinct memfd files the processes map or hold open (each counted once, however
    many processes map it): (device, inode) -> (name, size in bytes)."""
    found: dict[tuple[int, int], tuple[str, int]] = {}
    for pid in pids:
        try:
            lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
        except OSError:
            lines = []
        for line in lines:
            if "/memfd:" not in line:
                continue
            span, _perms, _offset, dev, inode, rest = line.split(None, 5)
            major, minor = (int(x, 16) for x in dev.split(":"))
            lo, hi = (int(x, 16) for x in span.split("-"))
            name = rest.split("/memfd:", 1)[1].replace(" (deleted)", "")
            key = (os.makedev(major, minor), int(inode))
            found[key] = (name, max(hi - lo, found.get(key, ("", 0))[1]))
        fd_dir = Path(f"/proc/{pid}/fd")
        try:
            fds = list(fd_dir.iterdir())
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(fd)
                if not target.startswith("/memfd:"):
                    continue
                st = os.stat(fd)
            except OSError:
                continue  # closed meanwhile
            name = target[len("/memfd:") :].replace(" (deleted)", "")
            found[(st.st_dev, st.st_ino)] = (name, st.st_size)
    return found


def rss_kib(pid: int, field: str = "VmRSS") -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def start(
    models: list[str],
    backend_config: tuple[Any, ...] = (),
    repository: Path = MODELS,
    **kwargs: Any,
) -> Any:
    return TritonServer(
        repository,
        model_control_mode="explicit",
        load_models=models,
        backend_config=backend_config,
        **kwargs,
    )


def stream(
    server: Any, cmd: str, timeout: float = 10.0, model: str = "chaos_decoupled"
) -> tuple[list[Any], float]:
    """Run one decoupled request over gRPC; returns the results/errors and when the last came."""
    import queue

    import tritonclient.grpc as grpcclient

    q: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.start_stream(callback=lambda result, error: q.put((result, error, time.monotonic())))
        inp = grpcclient.InferInput("CMD", [1], "BYTES")
        inp.set_data_from_numpy(np.array([cmd.encode()], dtype=np.object_))
        client.async_stream_infer(model, [inp], enable_empty_final_response=True)
        got = []
        while True:
            result, error, at = q.get(timeout=timeout)
            got.append(error if error is not None else result)
            if error is not None:
                return got, at
            final = result.get_response().parameters.get("triton_final_response")
            if final is not None and final.bool_param:
                return got, at
    finally:
        client.stop_stream()
        client.close()


def ok_stream(server: Any) -> list[Any] | None:
    """The decoupled chaos model's answer to "ok", or None if it failed."""
    got, _ = stream(server, "ok")
    return None if any(isinstance(g, Exception) for g in got) else got


def big_infer(
    client: Any, data: np.ndarray, grow: int | None = None, model: str = "big_identity"
) -> tuple[np.ndarray, int]:
    """Send IN (uint8) to a big_identity model over HTTP (binary); returns (OUT, PID)."""
    import tritonclient.http as httpclient

    inputs = [httpclient.InferInput("IN", list(data.shape), "UINT8")]
    inputs[0].set_data_from_numpy(data, binary_data=True)
    if grow is not None:
        inputs.append(httpclient.InferInput("GROW", [1], "INT64"))
        inputs[1].set_data_from_numpy(np.array([grow], dtype=np.int64), binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("OUT", "PID")]
    result = client.infer(model, inputs, outputs=outputs)
    return result.as_numpy("OUT"), int(result.as_numpy("PID")[0])
