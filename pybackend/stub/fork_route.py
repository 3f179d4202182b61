"""BLS from processes that model.py forks (``multiprocessing.Pool`` workers, ``os.fork``).

A forked child inherits the stub's two channels, its arena and the backend's segments, but
none of the threads that serve them, and whatever it sent or allocated there would collide
with the stub's own traffic and blocks. So at every fork the forking process makes a
private socketpair ("the route", fork_calls.py): the child sends its BLS calls there and the
parent serves them with its own BLS client. A child that forks again routes through its
parent the same way, so grandchildren work too.

The child closes its copies of the stub's channels (its logs go to stderr, which the backend
forwards too) and its copy of the arena refuses to allocate (:func:`_refuse_alloc`).

In a process that several instances share (PYBACKEND_INSTANCE_PROCESS=shared, host.py) the
route is served by the instance whose thread forked (the one pb_utils routes that thread's
calls to); the child inherited every instance's channels and arena, and disowns them all.
A fork from a thread that works for no instance gets no route: its BLS calls are refused.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from typing import Any, Callable, Iterable, List, Optional, Tuple

from ..utils.errors import TritonModelException
from . import stop_signals
from .fork_calls import ForkedBlsClient, RouteServer
from .logging import WARNING
from .state import StubState, fork_refusal

# The forking thread's instance: its transport (whose ``bls`` serves the route in the parent)
# and its state; None where the thread works for no instance (no route, BLS refused).
Resolve = Callable[[], Optional[Tuple[Any, StubState]]]


class ForkRoute:
    """Installs the fork hooks once per process (``os.register_at_fork``).

    ``resolve`` names the instance the forking thread works for (called in the parent);
    ``states`` lists every instance's state in the process (a shared process serves several,
    and the child inherits the channels and arena of all of them); ``in_child`` closes what
    else the child must not keep (a shared host's control socket). Those two run in the
    child, where they see the process as it was at the fork, and must take no lock: one that
    another thread held then stays held there."""

    def __init__(
        self,
        resolve: Resolve,
        states: Callable[[], Iterable[StubState]],
        in_child: Optional[Callable[[], None]] = None,
    ) -> None:
        self.resolve = resolve
        self.states = states
        self.in_child = in_child
        # Per thread: the after hooks run in the thread that forked, and another thread may
        # be waiting in _before meanwhile.
        self._pending = threading.local()
        # Route ends this process holds (pairs being made, the parent's ends of its children's
        # routes, its own end to its parent): a later child keeps none of them, or the peers
        # of those ends would not see EOF when the process at the other end dies. Replaced,
        # never changed in place, so the child reads it without the lock.
        self._held: Tuple[socket.socket, ...] = ()
        self._held_lock = threading.Lock()
        self._fork_lock = threading.Lock()
        os.register_at_fork(
            before=self._before,
            after_in_parent=self._after_in_parent,
            after_in_child=self._after_in_child,
        )

    @classmethod
    def for_stub(cls, transport: Any, state: StubState) -> "ForkRoute":
        """A stub process: one instance, whatever thread forks."""
        return cls(lambda: (transport, state), lambda: (state,))

    def _before(self) -> None:
        # One fork at a time: a thread between its socketpair() and _hold() when another
        # thread forks would leave that pair in the other's child.
        self._fork_lock.acquire()
        owner: Optional[Tuple[Any, StubState]] = None
        pair: Optional[Tuple[socket.socket, socket.socket]] = None
        try:
            owner = self.resolve()
            if owner is not None and getattr(owner[0], "bls", None) is None:
                owner = None
            if owner is not None:
                pair = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
                self._hold(*pair)
        except Exception as e:  # noqa: BLE001 - a fork hook must not fail the fork
            text = f"pybackend stub: no BLS route for a forked process: {e}"
            if owner is not None:
                owner[1].log.here(WARNING, text)
            else:
                print(text, file=sys.stderr, flush=True)
        self._pending.fork = (owner, pair)

    def _after_in_parent(self) -> None:
        pending, self._pending.fork = getattr(self._pending, "fork", None), None
        if pending is None:
            return  # our before hook did not run in this thread
        owner, pair = pending
        if pair is not None:
            # Closed before the lock goes: close() lets go of the GIL with the fd still open,
            # and a fork then would copy it (the object saying it is closed).
            pair[1].close()
            self._drop(pair[1])
        self._fork_lock.release()
        if owner is None or pair is None:
            return
        transport, state = owner
        log = state.log
        RouteServer(
            pair[0], transport.bls, lambda text: log.here(WARNING, text), self._retire
        ).start()

    def _after_in_child(self) -> None:
        pending, self._pending.fork = getattr(self._pending, "fork", None), None
        owner, pair = pending if pending is not None else (None, None)
        # Held by this thread at the fork, and by whoever held them in the parent: new ones.
        self._fork_lock, self._held_lock = threading.Lock(), threading.Lock()
        stop_signals.default_term_in_forked_child()
        for st in self.states():
            _disown(st)
        for sock in self._held:
            if pair is None or sock not in pair:
                sock.close()  # a route of the parent's, to another process
        self._held = ()
        if self.in_child is not None:
            self.in_child()
        if pair is None or owner is None:
            return
        transport, st = owner
        ours, theirs = pair
        ours.close()
        self._hold(theirs)
        where = f"pid {os.getppid()}, instance '{st.instance}'"
        transport.bls = ForkedBlsClient(st, theirs, where)

    def _hold(self, *socks: socket.socket) -> None:
        with self._held_lock:
            self._held += socks

    def _drop(self, sock: socket.socket) -> None:
        with self._held_lock:
            self._held = tuple(s for s in self._held if s is not sock)

    def _retire(self, sock: socket.socket) -> None:
        """Closes a route's end once its server is done (no fork while it closes)."""
        with self._fork_lock:
            sock.close()
            self._drop(sock)


def _disown(st: StubState) -> None:
    """In a forked child: ``st``'s channels and arena are the stub's, not the child's."""
    st.forked = True
    # A datagram the child sent there would count in the RESULT ordering (async_seq) of the
    # stub's own messages, and its copies of the sockets would hide the stub's death (EOF)
    # from the backend. Its logs go to stderr, which the backend forwards to the server log.
    st.log.channel = None
    for ch in (st.sync, st.async_):
        ch._lock = threading.Lock()  # a lock another thread held at the fork stays held
        try:
            ch.close()
        except OSError:
            pass
    st._rpc_lock = threading.Lock()
    st._open_lock = threading.RLock()
    if st.arena is not None:
        st.arena.alloc = _refuse_alloc(st.instance)  # type: ignore[method-assign]


def _refuse_alloc(instance: str) -> Callable[..., Tuple[int, int]]:
    def refuse(*_args: Any, **_kwargs: Any) -> Tuple[int, int]:
        raise TritonModelException(fork_refusal(instance, "Allocating the stub's shared memory"))

    return refuse


__all__: List[str] = ["ForkRoute", "ForkedBlsClient", "fork_refusal"]
