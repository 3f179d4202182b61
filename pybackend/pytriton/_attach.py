"""The user's process as the stub (attach mode, docs/protocol.md "Attach mode").

:class:`AttachListener` listens on a Unix SOCK_SEQPACKET socket named in every bound model's
configuration (parameter PYBACKEND_ATTACH_SOCKET). Each model instance of our backend
connects once and sends ATTACH with the fd of its async channel; the connection itself is the
sync channel. The listener then runs the stub's own loop (:class:`pybackend.stub.main.Stub`)
for that instance on a thread of this process, with a model object made by the binding
instead of one imported from model.py. From there on it is the normal protocol: one process
hop per request, tensors in memfd arenas.
"""

from __future__ import annotations

import array
import json
import logging
import os
import select
import socket
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from ..ipc.protocol import HEADER, MAX_DATAGRAM, MessageKind
from ..stub.dispatch import Dispatcher
from ..stub.threaded import RoutingTransport, ThreadedStub, routing_transport

__all__ = ["AttachListener", "AttachedStub", "RoutingTransport", "routing_transport"]

LOGGER = logging.getLogger("pybackend.pytriton")

#: (init args, dispatcher) -> the model object for one instance.
ModelFactory = Callable[[Dict[str, Any], Dispatcher], Any]
#: (model name, instance name) -> a factory, or None for a model this process does not serve.
Lookup = Callable[[str, str], Optional[ModelFactory]]

_JOIN_S = 10.0


class AttachedStub(ThreadedStub):
    """The stub's loop for one instance, on a thread of the serving process."""

    freeze_gc = False  # the process outlives this model

    def __init__(self, sync_fd: int, async_fd: int, instance: str, factory: ModelFactory) -> None:
        super().__init__(sync_fd, async_fd, instance)
        self._factory = factory

    def _import_model(self, init: Dict[str, Any]) -> Any:
        return None  # no model.py: the binding makes the model

    def _instantiate(self, module: Any, init: Dict[str, Any], dispatcher: Dispatcher) -> Any:
        return self._factory(init, dispatcher)


def _recv_attach(conn: socket.socket) -> Tuple[Dict[str, Any], List[int]]:
    """The first datagram of a connection: ATTACH with one fd (the async channel)."""
    fds = array.array("i")
    conn.settimeout(_JOIN_S)
    data, ancdata, _flags, _addr = conn.recvmsg(MAX_DATAGRAM, socket.CMSG_SPACE(4 * fds.itemsize))
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
    conn.settimeout(None)
    if len(data) < HEADER.size:
        raise ValueError(f"short datagram ({len(data)} bytes)")
    kind, _f, body_len, _id = HEADER.unpack_from(data)
    if kind != MessageKind.ATTACH:
        raise ValueError(f"expected ATTACH (kind {int(MessageKind.ATTACH)}), got kind {kind}")
    body = memoryview(data)[HEADER.size : HEADER.size + body_len]
    n = int.from_bytes(body[:4], "little")
    return json.loads(bytes(body[4 : 4 + n]).decode()), list(fds)


class AttachListener:
    """Accepts the backend's instances; one thread per attached instance."""

    def __init__(self, path: str, lookup: Lookup) -> None:
        self.path = path
        self._lookup = lookup
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock.bind(path)
        os.chmod(path, 0o600)  # only this user's tritonserver may attach
        self._sock.listen(64)
        self._stop_r, self._stop_w = os.pipe()
        self._threads: List[threading.Thread] = []
        self._lock = threading.Lock()
        self._routing = routing_transport()
        self._accepter = threading.Thread(
            target=self._accept_loop, name="pytriton-attach-listener", daemon=True
        )
        self._accepter.start()

    def _accept_loop(self) -> None:
        poller = select.poll()
        poller.register(self._sock.fileno(), select.POLLIN)
        poller.register(self._stop_r, select.POLLIN)
        while True:
            ready = {fd for fd, _ in poller.poll()}
            if self._stop_r in ready:
                return
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            try:
                hello, fds = _recv_attach(conn)
            except (OSError, ValueError) as e:
                LOGGER.error("pybackend.pytriton: refused a connection on %s: %s", self.path, e)
                conn.close()
                continue
            self._start_instance(conn, hello, fds)

    def _start_instance(self, conn: socket.socket, hello: Dict[str, Any], fds: List[int]) -> None:
        model = str(hello.get("model_name", ""))
        instance = str(hello.get("instance_name", model))
        factory = self._lookup(model, instance)
        if factory is None or len(fds) != 1:
            # Closing both ends fails the instance's load with "closed its connection".
            LOGGER.error("pybackend.pytriton: no bound model %r for instance %r", model, instance)
            conn.close()
            for fd in fds:
                os.close(fd)
            return
        sync_fd = conn.detach()
        thread = threading.Thread(
            target=self._serve_instance,
            args=(sync_fd, fds[0], instance, factory),
            name=f"pytriton-{instance}",
            daemon=True,
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _serve_instance(
        self, sync_fd: int, async_fd: int, instance: str, factory: ModelFactory
    ) -> None:
        stub = AttachedStub(sync_fd, async_fd, instance, factory)
        self._routing.bind_thread(stub.transport)
        try:
            stub.serve()
        except Exception:  # noqa: BLE001 - this instance ends; the process and others go on
            LOGGER.exception("pybackend.pytriton: instance %s failed", instance)
        finally:
            stub.close()
            self._routing.bind_thread(None)

    def close(self) -> None:
        """Stop accepting; wait (bounded) for the instance threads, which end once the
        server has finalized or dropped their instances."""
        os.write(self._stop_w, b"x")
        self._accepter.join(_JOIN_S)
        self._sock.close()
        os.close(self._stop_r)
        os.close(self._stop_w)
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(_JOIN_S)

    def instances_alive(self) -> int:
        with self._lock:
            return sum(1 for t in self._threads if t.is_alive())
