"""Several instances' stubs as threads of one process: attach mode (pybackend.pytriton) and
a model's shared process (PYBACKEND_INSTANCE_PROCESS=shared, docs/instances.md).

pb_utils finds its transport through one process-wide slot (utils/transport.py); here the
process holds one stub per instance, so :class:`RoutingTransport` gives each thread the
transport of the instance it works for. A thread started by an instance's thread (a
decoupled model's response thread, the instance's event loop, a thread pool's workers)
works for the same instance: the binding is inherited when the thread is created.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from typing import Any, Dict, Optional, Tuple

from ..utils import transport as utils_transport
from ..utils.errors import TritonModelException
from ..utils.transport import Transport
from . import host_output
from .dispatch import Dispatcher
from .main import Stub

_JOIN_S = 10.0

# The instance transport of the thread running now (None: none bound).
_local = threading.local()


def _bound() -> Optional[Transport]:
    return getattr(_local, "transport", None)


def bound_instance() -> Optional[str]:
    """The instance the calling thread works for (None: none)."""
    state = getattr(_bound(), "state", None)
    return getattr(state, "instance", None)


class RoutingTransport(Transport):
    """Each thread's calls go to the transport of the instance it works for; threads bound
    to none get the transport that was installed before."""

    def __init__(self, fallback: Transport) -> None:
        self._fallback = fallback

    def bind_thread(self, transport: Optional[Transport]) -> None:
        _local.transport = transport

    def current(self) -> Transport:
        return _bound() or self._fallback

    @property  # type: ignore[override]
    def model_dir(self) -> str:  # type: ignore[override]
        return self.current().model_dir

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        self.current().log(level, filename, line, message)

    def send_response(self, request: Any, response: Any, flags: int) -> None:
        self.current().send_response(request, response, flags)

    def is_cancelled(self, request: Any) -> bool:
        return self.current().is_cancelled(request)

    def sender_created(self, request: Any, sender: Any) -> None:
        self.current().sender_created(request, sender)

    def bls_exec(self, request: Any, decoupled: bool) -> Any:
        return self.current().bls_exec(request, decoupled)

    def bls_async_exec(self, request: Any, decoupled: bool) -> Any:
        return self.current().bls_async_exec(request, decoupled)

    def model_control(self, op: str, **kwargs: Any) -> Any:
        return self.current().model_control(op, **kwargs)

    def metric_family_new(self, name: str, description: str, kind: int) -> int:
        return self.current().metric_family_new(name, description, kind)

    def metric_family_delete(self, family_id: int) -> None:
        self.current().metric_family_delete(family_id)

    def metric_new(self, family_id: int, labels: Any, buckets: Any) -> int:
        return self.current().metric_new(family_id, labels, buckets)

    def metric_op(self, op: str, metric_id: int, value: float) -> float:
        return self.current().metric_op(op, metric_id, value)

    def empty_array(self, shape: Tuple[int, ...], dtype: Any) -> Any:
        return self.current().empty_array(shape, dtype)

    def free_memory(self) -> int:
        return self.current().free_memory()


class NoInstanceTransport(host_output.HostTransport):
    """For threads of a shared process that work for no instance (started at import time):
    what needs an instance fails saying so, instead of going nowhere."""

    def __init__(self, model: str) -> None:
        self.model = model

    def _refuse(self, what: str) -> TritonModelException:
        return TritonModelException(
            f"{what} from thread '{threading.current_thread().name}' of the process that the "
            f"instances of model '{self.model}' share (PYBACKEND_INSTANCE_PROCESS=shared): that "
            "thread works for no instance (it was not started by an instance's thread, e.g. it "
            "was started when model.py was imported). Call it from execute or initialize, or "
            "from a thread that one of them started."
        )

    def send_response(self, request: Any, response: Any, flags: int) -> None:
        raise self._refuse("Sending a response")

    def bls_exec(self, request: Any, decoupled: bool) -> Any:
        raise self._refuse("BLS (InferenceRequest.exec/async_exec)")

    def model_control(self, op: str, **kwargs: Any) -> Any:
        raise self._refuse(f"Model control ({op})")

    def metric_family_new(self, name: str, description: str, kind: int) -> int:
        raise self._refuse("Creating a MetricFamily")


_routing_lock = threading.Lock()
_inherit_installed = False


def _install_inheritance() -> None:
    """Threads created by a bound thread start bound to the same instance."""
    global _inherit_installed
    if _inherit_installed:
        return
    _inherit_installed = True
    original_init = threading.Thread.__init__
    # The binding is set where every thread starts, before run(): a model's Thread subclass
    # that overrides run() (and does not call super().run()) inherits it too. CPython has had
    # Thread._bootstrap_inner since 3.0; run() is the fallback should it ever go.
    start_name = "_bootstrap_inner" if hasattr(threading.Thread, "_bootstrap_inner") else "run"
    original_start = getattr(threading.Thread, start_name)

    def __init__(self: threading.Thread, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        self._pybackend_transport = _bound()  # type: ignore[attr-defined]

    def start(self: threading.Thread) -> None:
        inherited = getattr(self, "_pybackend_transport", None)
        if inherited is not None and _bound() is None:
            _local.transport = inherited
        original_start(self)

    threading.Thread.__init__ = __init__  # type: ignore[method-assign]
    setattr(threading.Thread, start_name, start)


def routing_transport() -> RoutingTransport:
    """Installed once per process, on first use."""
    with _routing_lock:
        current = utils_transport.get_transport()
        if isinstance(current, RoutingTransport):
            return current
        routing = RoutingTransport(current)
        utils_transport.set_transport(routing)
        _install_inheritance()
        return routing


class ThreadedStub(Stub):
    """The stub's loop for one instance, on a thread of a process that serves several."""

    exit_with_backend = False  # the backend's end is this instance's end only
    thread_loop: Any = None  # the asyncio loop set for this instance's thread, if any

    def _import_model(self, init: Dict[str, Any]) -> Any:
        # model.py is imported once for every instance of the process: a thread it starts
        # works for none of them (not for the one whose thread happened to import it).
        saved = _bound()
        _local.transport = None
        try:
            return super()._import_model(init)
        finally:
            _local.transport = saved
            self._set_thread_loop()

    def _set_thread_loop(self) -> None:
        """An instance's own stub runs initialize and execute on its process's main thread,
        where asyncio.get_event_loop() gives a loop (not running) with none set; on any other
        thread it raises. Model code written for that (``get_event_loop().run_until_complete``
        in initialize) gets a loop of its thread's own here, where model.py or what it
        imported uses asyncio (the import costs a process that never uses it ~40 ms)."""
        asyncio = sys.modules.get("asyncio")
        if asyncio is None or self.thread_loop is not None:
            return
        self.thread_loop = asyncio.new_event_loop()
        asyncio.set_event_loop(self.thread_loop)

    def close(self) -> None:
        """Everything this instance held, without ending the process."""
        st = self.state
        try:
            st.ledger.flush()
        except Exception:  # noqa: BLE001 - the backend may be gone already
            pass
        for ch in (st.sync, st.async_):
            try:
                sock = socket.socket(fileno=ch.fileno())
                try:
                    sock.shutdown(socket.SHUT_RDWR)  # the reader thread sees EOF
                finally:
                    sock.detach()
            except OSError:
                pass
        if self.reader is not None:
            self.reader.join(_JOIN_S)
        if self.dispatcher is not None:
            close_loop(self.dispatcher)
        if self.thread_loop is not None and not self.thread_loop.is_running():
            self.thread_loop.close()
        st.close()
        for fd in (st.wake_r, st.wake_w):
            try:
                os.close(fd)
            except OSError:
                pass
        if st.arena is not None:
            st.arena.close()
        st.peer.close()


def close_loop(dispatcher: Dispatcher) -> None:
    """A stub process never closes its event loop (it exits); this process goes on."""
    loop = dispatcher.loop
    if loop is None:
        return
    dispatcher.stop_loop()
    deadline = time.monotonic() + _JOIN_S
    while loop.is_running() and time.monotonic() < deadline:
        time.sleep(0.01)
    if not loop.is_running():
        loop.close()
