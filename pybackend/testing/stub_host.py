"""The process a model's instances share under PYBACKEND_INSTANCE_PROCESS shared or fork
(``python -m pybackend.stub.host``), started and driven as the backend does
(csrc/backend/instance_host.cc): a control socket on its fd 3; per instance one datagram
``{"instance", "init"}`` with the far ends of the instance's two channels, answered by
``{"pid": N}`` (the process serving the instance) or ``{"error": text}``. From there the
instance speaks the normal protocol on its channels (a :class:`StubDriver` over them).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..utils.errors import TritonModelException
from .stub_launch import start_on_fds_3_and_4, stub_environment

#: Seconds the host has to answer an attach (the fork host imports model.py first).
ATTACH_TIMEOUT_S = 120.0


class StubHost:
    """One host process of ``mode`` ("shared" or "fork") for ``model``."""

    def __init__(
        self,
        model: str,
        mode: str,
        env: Dict[str, str],
        python: str,
        unset: Sequence[str],
        output: List[str],
    ) -> None:
        self.model, self.mode = model, mode
        self._lock = threading.Lock()
        control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        spare_a, spare_b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        # The control socket on fd 3; fd 4 as the backend leaves it: unused, closed by the host.
        self.proc = start_on_fds_3_and_4(
            [python, "-m", "pybackend.stub.host", "--model", model, "--mode", mode],
            theirs.fileno(),
            spare_b.fileno(),
            stub_environment(env, unset),
            Path(os.getcwd()),
        )
        theirs.close()
        spare_a.close()
        spare_b.close()
        self.control = control
        self.readers = [
            threading.Thread(target=drain_lines, args=(stream, output), daemon=True)
            for stream in (self.proc.stdout, self.proc.stderr)
        ]
        for reader in self.readers:
            reader.start()

    def attach(
        self, instance: str, init: Dict[str, Any]
    ) -> Tuple[socket.socket, socket.socket, int]:
        """The instance's channels (our ends) and the pid of the process serving it."""
        sync_ours, sync_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        async_ours, async_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        body = json.dumps({"instance": instance, "init": init}).encode()
        with self._lock:  # one attach at a time: the replies come in order
            try:
                socket.send_fds(self.control, [body], [sync_theirs.fileno(), async_theirs.fileno()])
            finally:
                sync_theirs.close()
                async_theirs.close()
            self.control.settimeout(ATTACH_TIMEOUT_S)
            try:
                reply = self.control.recv(1 << 16)
            except OSError as e:
                reply = b""
                why: Optional[BaseException] = e
            else:
                why = None
        if not reply:
            sync_ours.close()
            async_ours.close()
            raise TritonModelException(
                f"model '{self.model}', instance '{instance}' (PYBACKEND_INSTANCE_PROCESS="
                f"{self.mode}): the process the instances share did not answer the attach "
                f"({why or 'it closed its control socket'})"
            )
        answer = json.loads(reply)
        if "error" in answer:
            sync_ours.close()
            async_ours.close()
            raise TritonModelException(str(answer["error"]))
        return sync_ours, async_ours, int(answer["pid"])

    def close(self, timeout: float = 10.0) -> None:
        """EOF on the control socket ends the host (and, under fork, its children)."""
        try:
            self.control.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for reader in self.readers:
            reader.join(2.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


class HostedProcess:
    """What a :class:`StubDriver` needs of "its process" for an instance served by a host:
    the host itself under ``shared`` (killing it ends every instance, as the backend's
    execute timeout does), the forked child under ``fork`` (the host's child, not ours:
    watched through /proc)."""

    stdout = None
    stderr = None

    def __init__(self, host: StubHost, pid: int) -> None:
        self.host = host
        self.pid = pid
        self.returncode: Optional[int] = None
        #: Whether the instance's channels closed (the driver's async reader saw EOF).
        self.channels_closed: Callable[[], bool] = lambda: False

    def poll(self) -> Optional[int]:
        code = self.host.proc.poll()
        if code is not None:
            self.returncode = code
        elif self.pid != self.host.proc.pid and not _exists(self.pid):
            self.returncode = -1
        return self.returncode

    def wait(self, timeout: Optional[float] = None) -> int:
        """Until the instance ended: its process gone, or (a thread of the shared host)
        its channels closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if self.pid == self.host.proc.pid and self.channels_closed():
                return 0
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"instance process {self.pid}", timeout or 0)
            time.sleep(0.01)
        return self.returncode if self.returncode is not None else -1

    def kill(self) -> None:
        if self.pid == self.host.proc.pid:
            self.host.proc.kill()
        else:
            try:
                os.kill(self.pid, 9)
            except OSError:
                pass


def _exists(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def drain_lines(stream: Optional[IO[bytes]], output: List[str]) -> None:
    """Append the lines of a process's pipe to ``output`` as they come (a thread's target:
    a process that prints more than a pipe holds must not block) until it closes."""
    if stream is None:
        return
    try:
        for line in iter(stream.readline, b""):
            output.append(line.decode(errors="replace").rstrip("\n"))
    except (OSError, ValueError):
        pass  # closed by whoever closes the process
