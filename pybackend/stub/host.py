"""``python -m pybackend.stub.host --model NAME --mode shared|fork``: the process a model's
instances share (model parameter PYBACKEND_INSTANCE_PROCESS, docs/instances.md).

The backend starts it like a stub, with a control socket on fd 3. For each instance it sends
one datagram on it: JSON ``{"instance": name, "init": INIT arguments, "placement": the CPU
affinity and memory policy of the instance's thread in the backend}`` with two fds, the far
ends of that instance's sync and async channels. The host answers ``{"pid": N}`` (the
process that serves the instance, whose death the backend watches) or ``{"error": text}``.
From there on the instance speaks the normal protocol (docs/protocol.md) on its channels.

* ``shared``: the instance's stub loop runs on a thread of this process. model.py is
  imported once (the module cache); each instance has its own TritonPythonModel,
  ``initialize``, ``execute`` thread, senders and ``finalize``.
* ``fork``: this process imports model.py once, freezes the collector (so reference counts
  do not unshare the imported pages), then forks a child per instance that serves as a
  normal stub. The children die with this process (PR_SET_PDEATHSIG).

EOF on the control socket means the backend is gone or done with the model: the host exits.
"""

from __future__ import annotations

import ctypes
import faulthandler
import gc
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

if TYPE_CHECKING:  # pragma: no cover - imported where used: the fork host needs neither
    from .state import StubState
    from .threaded import ThreadedStub

from . import host_output, stop_signals
from .main_thread import MainThreadCalls
from .placement import apply_placement

CONTROL_FD = 3
_MAX_REQUEST = 1 << 22
_PR_SET_PDEATHSIG = 1

Request = Tuple[str, Dict[str, Any], List[int], Optional[Dict[str, Any]]]


class _Host:
    def __init__(self, control: socket.socket, model: str) -> None:
        self.control = control
        self.model = model

    def run(self) -> None:
        while True:
            req = self._recv()
            if req is None:
                return  # the backend is gone or done with the model
            instance, init, fds, placement = req
            if len(fds) != 2:
                for fd in fds:
                    os.close(fd)
                self._reply({"error": f"expected 2 channel fds, got {len(fds)}"})
                continue
            self.attach(instance, init, fds, placement)

    def attach(
        self,
        instance: str,
        init: Dict[str, Any],
        fds: List[int],
        placement: Optional[Dict[str, Any]],
    ) -> None:
        raise NotImplementedError

    def _recv(self) -> Optional[Request]:
        msg, fds, _flags, _addr = socket.recv_fds(self.control, _MAX_REQUEST, 2)
        if not msg:
            return None
        req = json.loads(msg.decode())
        instance, init = str(req.get("instance", "")), dict(req.get("init") or {})
        return instance, init, list(fds), req.get("placement")

    def _reply(self, answer: Dict[str, Any]) -> None:
        self.control.send(json.dumps(answer).encode())


class SharedHost(_Host):
    """One thread per instance."""

    def __init__(self, control: socket.socket, model: str) -> None:
        super().__init__(control, model)
        from ..utils import transport as utils_transport
        from .fork_route import ForkRoute
        from .logging import RecordForwarder
        from .threaded import NoInstanceTransport, bound_instance, routing_transport

        utils_transport.set_transport(NoInstanceTransport(model))
        self.routing = routing_transport()
        # One pair of pipes serves every instance: each line says whose it is, and Python
        # logging records reach the server log at their level, as in an instance's own stub.
        host_output.tag_streams(bound_instance)
        logging.lastResort = RecordForwarder(self.routing)
        # Signal handlers that an instance's code installs are set by the main thread.
        self.main_calls = MainThreadCalls()
        self.main_calls.install()
        self._poll = select.poll()
        self._poll.register(self.control, select.POLLIN)
        self._poll.register(self.main_calls.wake_fd, select.POLLIN)
        # Replaced, never changed in place, so a forked child reads them without a lock
        # (one that another thread held at the fork would stay held in the child).
        self.stubs: Tuple["ThreadedStub", ...] = ()  # ThreadedStub of every instance being served
        self.arriving: Tuple[int, ...] = ()  # channel fds received, their stub not made yet
        self._lock = threading.Lock()
        ForkRoute(self._forking_instance, self._states, self._close_in_child)

    def _recv(self) -> Optional[Request]:
        while True:
            try:
                ready = {fd for fd, _events in self._poll.poll()}
                if self.main_calls.wake_fd in ready:
                    self.main_calls.run_pending()
            except Exception:  # noqa: BLE001 - a signal handler of model.py's raised here
                traceback.print_exc()
                continue
            if self.control.fileno() in ready:
                return super()._recv()

    def attach(
        self,
        instance: str,
        init: Dict[str, Any],
        fds: List[int],
        placement: Optional[Dict[str, Any]],
    ) -> None:
        with self._lock:
            self.arriving += tuple(fds)
        thread = threading.Thread(
            target=self._serve,
            args=(fds[0], fds[1], instance, placement),
            name=f"pb-{instance}",
            daemon=True,
        )
        thread.start()
        self._reply({"pid": os.getpid()})

    def _serve(
        self, sync_fd: int, async_fd: int, instance: str, placement: Optional[Dict[str, Any]]
    ) -> None:
        from .threaded import ThreadedStub

        # First: the threads the instance starts from here inherit it.
        apply_placement(self.model, instance, placement)

        stub = None
        try:
            stub = ThreadedStub(sync_fd, async_fd, instance)
        finally:
            with self._lock:
                if stub is not None:
                    self.stubs += (stub,)
                # Not closed by number in a child from here on: the stub owns them now
                # (or, if it failed, they may be closed and their numbers reused).
                self.arriving = tuple(fd for fd in self.arriving if fd not in (sync_fd, async_fd))
                self._name_instances()
        self.routing.bind_thread(stub.transport)
        try:
            stub.serve()
        except BaseException:  # noqa: BLE001 - say why; the backend sees the channels close
            traceback.print_exc()
        finally:
            host_output.end_instance(instance)
            stub.close()
            with self._lock:
                self.stubs = tuple(s for s in self.stubs if s is not stub)
                self._name_instances()
            self.routing.bind_thread(None)

    def _name_instances(self) -> None:
        """For processes that model.py starts with multiprocessing's spawn or forkserver:
        they inherit the environment, not the instance, and their refused BLS names these
        (utils/transport.py; a stub exports its one instance the same way)."""
        from ..utils.transport import STUB_INSTANCE_ENV

        names = "\n".join(stub.instance for stub in self.stubs)
        if names:
            os.environ[STUB_INSTANCE_ENV] = names

    # A process that model.py forks (fork_route.py) routes its BLS calls through the instance
    # whose thread forked it, and keeps none of the instances' channels nor the control socket.

    def _forking_instance(self) -> Optional[Tuple[Any, "StubState"]]:
        current = self.routing.current()
        for stub in self.stubs:
            if stub.transport is current:
                return stub.transport, stub.state
        return None  # a thread that works for no instance: its BLS is refused, not routed

    def _states(self) -> List["StubState"]:
        return [stub.state for stub in self.stubs]

    def _close_in_child(self) -> None:
        # The backend watches the host's end of the control socket (and an instance's
        # channels) for EOF: a child's copy would hide the host's death.
        for fd in self.arriving:
            try:
                os.close(fd)
            except OSError:
                pass  # its stub was made (and its channels closed) while we looked
        self.control.close()


class ForkHost(_Host):
    """model.py imported here once; one forked child per instance."""

    def __init__(self, control: socket.socket, model: str) -> None:
        super().__init__(control, model)
        self.imported = False
        self.children: Dict[int, str] = {}
        signal.signal(signal.SIGCHLD, self._on_child)
        # The import works for no instance: its log records go out as tagged records.
        from ..utils import transport as utils_transport
        from .logging import RecordForwarder

        host_transport = host_output.HostTransport()
        utils_transport.set_transport(host_transport)
        logging.lastResort = RecordForwarder(host_transport)

    def attach(
        self,
        instance: str,
        init: Dict[str, Any],
        fds: List[int],
        placement: Optional[Dict[str, Any]],
    ) -> None:
        if not self.imported:
            self.imported = True
            self._import(init)
        refusal = cuda_refusal(self.model)
        if refusal is not None:
            for fd in fds:
                os.close(fd)
            self._reply({"error": refusal})
            return
        pid = os.fork()
        if pid == 0:
            self._child(instance, fds, placement)  # never returns
        for fd in fds:
            os.close(fd)
        self.children[pid] = instance
        self._reply({"pid": pid})

    def _import(self, init: Dict[str, Any]) -> None:
        from . import loader

        before = set(threading.enumerate())
        try:
            loader.import_model(init)
        except BaseException:  # noqa: BLE001 - each child imports again and reports it
            return
        warning = import_threads_warning(self.model, before)
        if warning is not None:
            # On stderr: logged by the backend, and in the errors of a child that hangs.
            print(warning, file=sys.stderr, flush=True)
        # What the import made lives as long as the children: keep the collector off it,
        # so a collection in a child does not write to (and so copy) those pages.
        gc.collect()
        gc.freeze()

    def _child(self, instance: str, fds: List[int], placement: Optional[Dict[str, Any]]) -> None:
        try:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            host = os.getppid()
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            if os.getppid() != host:
                os._exit(1)  # the host died between fork and prctl
            self.control.close()
            # The host's pipes are every child's: each line of this one names its instance.
            host_output.tag_streams(lambda: instance)
            # The child has one thread: what it starts from here inherits the placement.
            apply_placement(self.model, instance, placement)
            from .main import run

            run(fds[0], fds[1], instance)
        except BaseException:  # noqa: BLE001 - last resort: say why we die
            traceback.print_exc()
        os._exit(1)

    def _on_child(self, signum: int, frame: Any) -> None:
        """Reaps the children; the way one ended goes to stderr, whose tail the backend puts
        into the errors of that instance's requests."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            instance = self.children.pop(pid, None)
            if instance is None:
                continue
            if os.WIFSIGNALED(status):
                sig = os.WTERMSIG(status)
                how = f"was killed by signal {sig} ({signal.Signals(sig).name})"
            else:
                code = os.waitstatus_to_exitcode(status)
                if code == 0:
                    continue
                how = f"exited with code {code}"
            print(
                f"pybackend: the process of instance '{instance}' (pid {pid}) {how}",
                file=sys.stderr,
                flush=True,
            )


def import_threads_warning(model: str, before: "set[threading.Thread]") -> Optional[str]:
    """The warning for a fork host whose import started threads (not in ``before``), or
    None. A forked child has only the thread that forked it: the others, and whatever they
    were doing, are not there, and a lock one of them held at the fork stays held."""
    started = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
    if not started:
        return None
    return (
        f"pybackend: WARNING: importing model.py of model '{model}' started threads "
        f"({', '.join(started)}), and under PYBACKEND_INSTANCE_PROCESS=fork the instances' "
        "forked processes do not have them: an initialize or execute that waits for one of "
        "them, or for a lock one of them held at the fork, hangs there. Start such threads in "
        "initialize() (each instance's process then has its own), or use "
        'PYBACKEND_INSTANCE_PROCESS "shared" or "own".'
    )


def cuda_refusal(model: str) -> Optional[str]:
    """The error for a fork host whose import initialized CUDA, or None."""
    what = None
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_initialized():
                what = "torch.cuda.is_initialized() is True"
        except Exception:  # noqa: BLE001 - a torch without CUDA support
            pass
    if what is None:
        from ..utils import cuda_driver

        if cuda_driver.initialized_in_process():
            what = "the CUDA driver was initialized (cuInit)"
    if what is None:
        return None
    return (
        f"importing model.py of model '{model}' initialized CUDA ({what}), and a process that "
        "has initialized CUDA cannot fork children that use it, so PYBACKEND_INSTANCE_PROCESS="
        "fork cannot serve this model. Move the CUDA work (models or tensors moved to the GPU, "
        "torch.cuda calls) from the module level into initialize(), or use "
        'PYBACKEND_INSTANCE_PROCESS "shared" or "own".'
    )


def main(argv: List[str]) -> None:
    # SIGTERM and SIGINT are ignored, as by the original's stub: tritonserver stops us.
    stop_signals.ignore()
    faulthandler.enable(file=sys.stderr, all_threads=False)
    from .__main__ import (
        _check_interpreter,
        _close_inherited_fds,
        _own_packages_first,
        hide_own_arguments,
        working_directory_as_original,
    )

    try:
        os.close(CONTROL_FD + 1)  # the stub's async fd: unused here
    except OSError:
        pass
    _close_inherited_fds(CONTROL_FD)

    import argparse

    parser = argparse.ArgumentParser(prog="python -m pybackend.stub.host")
    parser.add_argument("--model", default="")
    parser.add_argument("--mode", choices=("shared", "fork"), default="shared")
    args = parser.parse_args(argv)
    hide_own_arguments()
    working_directory_as_original()
    _own_packages_first()
    _check_interpreter()
    control = socket.socket(fileno=CONTROL_FD)
    host = ForkHost(control, args.model) if args.mode == "fork" else SharedHost(control, args.model)
    try:
        host.run()
        if isinstance(host, SharedHost):
            # The instances' process ends here, as each instance's own stub ends after its
            # finalize. (A fork host's import registered handlers for its children, which
            # run them as stubs do.)
            from .main import run_exit_handlers

            run_exit_handlers()
    except BaseException:  # noqa: BLE001 - last resort: say why we die
        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # instance threads still running end with the process


if __name__ == "__main__":
    main(sys.argv[1:])
