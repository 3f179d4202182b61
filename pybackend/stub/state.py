"""Everything the stub's threads share: the two channels, our arena, the backend's
segments, the ledger of shared memory (stub/ledger.py), and RPCs waiting for a REPLY."""

from __future__ import annotations

import collections
import itertools
import os
import socket
import threading
import weakref
from typing import TYPE_CHECKING, Callable, Deque, Dict, List, Optional, Tuple

from ..ipc import codec, rpc_codec
from ..ipc.arena import Arena
from ..ipc.channel import Channel, Message
from ..ipc.peer_segments import PeerSegments
from ..ipc.protocol import DEFAULT_INLINE_THRESHOLD, MAX_INLINE_BODY, MessageKind, Owner
from ..utils.errors import ErrorCode
from .ledger import Ledger
from .logging import WARNING, StubLog

if TYPE_CHECKING:
    from .returns import OutputRules

RPC_TIMEOUT_S = 30.0
# A drop error's text is cut to fit one inline message: it is sent from the reader thread,
# where a body in the arena could need a new segment (a blocking send of its own).
_DROP_TEXT_MAX = MAX_INLINE_BODY // 2
_FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL


def fork_refusal(instance: str, what: str) -> str:
    """The error of something a process forked by model.py cannot do (fork_route.py)."""
    return (
        f"{what} is not supported in a process forked by model.py of instance '{instance}' "
        f"(pid {os.getpid()}): only BLS (InferenceRequest.exec/async_exec) and logging work "
        "there. Do it in the model's own process (e.g. return the worker's result to it)."
    )


class RpcError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class _Pending:
    __slots__ = ("event", "result")

    def __init__(self) -> None:
        self.event = threading.Event()
        self.result: Optional[Tuple[bool, int, str, bytes]] = None


class _WatchRef(weakref.ref):
    """Weak reference to a Python object of an open request (the request or its sender)."""

    __slots__ = ("token",)
    token: int


def spin_seconds(variable: str = "PYBACKEND_STUB_SPIN_US", default: float = 0.0) -> float:
    """PYBACKEND_STUB_SPIN_US: how long a wait on the sync channel polls for the next message
    before it sleeps; PYBACKEND_STUB_BLS_SPIN_US: how long the wait for a BLS call's answer
    does. The backend sets both for every stub it starts from its own decisions
    (csrc/backend/lane_spin.h: off unless cores are to spare); ``default`` when unset (attach
    mode: 0) or unreadable."""
    try:
        return max(0.0, float(os.environ[variable]) / 1e6)
    except (KeyError, ValueError):
        return default


class StubState:
    def __init__(self, sync_fd: int, async_fd: int, instance: str) -> None:
        self.instance = instance
        self.peer = PeerSegments()
        self.arena: Optional[Arena] = None
        self.sync = Channel(socket.socket(fileno=sync_fd), self._indirect_out, self._indirect_in)
        self.async_ = Channel(socket.socket(fileno=async_fd), self._indirect_out, self._indirect_in)
        self.log = StubLog(self.async_)
        self.inline_threshold = DEFAULT_INLINE_THRESHOLD
        # How long a wait on sync polls before it sleeps: for EXECUTE (main.py), and for the
        # answer of a BLS call made on sync (bls.py), which comes after the callee's turn.
        self.spin_s = spin_seconds()
        self.bls_spin_s = spin_seconds("PYBACKEND_STUB_BLS_SPIN_US", self.spin_s)
        # The model's output rules when PYBACKEND_STRICT_OUTPUTS is on (stub/returns.py);
        # None by default: outputs go out unchecked, as the original sends them.
        self.output_rules: Optional[OutputRules] = None
        self.wake_r, self.wake_w = os.pipe()
        os.set_blocking(self.wake_w, False)
        os.set_blocking(self.wake_r, False)
        # Every block, hold and mapping shared with the backend, and when each goes back.
        self.ledger = Ledger(
            instance,
            self.peer,
            self.async_,
            self.sync,
            self.wake_reader,
            lambda text: self.log.here(WARNING, text),
        )
        # One-way messages queued from garbage-collector callbacks (metric deletes): those may
        # run on any thread, even inside a send on this one, so they never send themselves.
        self.oneway: Deque[Tuple[int, bytes]] = collections.deque()
        # True while the main thread runs an execute whose RESULT the backend's instance
        # thread waits for on sync: a blocking BLS call made by that thread then goes on
        # sync, where that backend thread starts it and answers (bls.py, "on sync").
        self.sync_calls = False
        self.main_ident = threading.get_ident()
        self._rpc_ids = itertools.count(1)
        self._rpcs: Dict[int, _Pending] = {}
        self._rpc_lock = threading.Lock()
        self.dead = False
        # True in a process that model.py forked from the stub (fork_route.py): it must not
        # wait for REPLYs, which the stub's reader thread, not this process, receives.
        self.forked = False
        # Handlers of further async message kinds (BLS responses), run on the reader thread.
        self.handlers: Dict[int, Callable[[Message], None]] = {}
        # Called once the backend is gone, to fail whatever waits on it.
        self.dead_hooks: List[Callable[[], None]] = []
        # Open requests (no FINAL yet) -> how many of their Python objects are alive.
        # Reentrant: a watched object may die in a GC pass that runs inside the lock.
        self._open: Dict[int, int] = {}
        self._open_lock = threading.RLock()
        self._watch_refs: Dict[int, _WatchRef] = {}
        self._on_watched_dead = self._watched_dead
        # Open requests whose failure a dropped sender reports (fail_on_drop): token -> the
        # SEND body of the error response with FINAL, built in advance.
        self._drop_errors: Dict[int, bytes] = {}

    # ------------------------------------------------------------------ arena

    def make_arena(self, default_size: int, growth_size: int, max_size: int = 0) -> Arena:
        self.arena = self.ledger.arena = Arena(
            Owner.STUB,
            default_size,
            growth_size,
            self._announce,
            self._drop,
            max_size=max(0, max_size),
            knob="the backend config shm-max-byte-size",
        )
        return self.arena

    def _announce(self, seg: int, size: int, fd: int) -> None:
        self.async_.send(
            MessageKind.SEGMENT_ADD, codec.encode_segment_add(Owner.STUB, seg, size), fds=[fd]
        )

    def _drop(self, seg: int) -> bool:
        """Runs on the reader thread: never wait for socket space there."""
        try:
            self.async_.send(
                MessageKind.SEGMENT_DROP,
                codec.encode_segment_drop(Owner.STUB, seg),
                nonblocking=True,
            )
        except BlockingIOError:
            return False
        except OSError:
            pass
        return True

    def _indirect_out(self, body: codec.Buffer) -> Tuple[int, int]:
        if self.arena is None:
            raise codec.ProtocolError("message body too large to send before INIT")
        mv = memoryview(body).cast("B")
        seg, off = self.arena.alloc(mv.nbytes)
        self.arena.write(seg, off, mv)
        return seg, off

    def _indirect_in(self, seg: int, off: int, length: int) -> bytes:
        mm = self.peer.get(seg, off, length)
        data = mm[off : off + length] if mm is not None else b""
        self.ledger.give_back(seg, off)
        return data

    # ------------------------------------------------------------------ wake-ups

    def wake_reader(self) -> None:
        """Make the reader thread re-evaluate its timers (pending FREEs, idle segments)."""
        try:
            os.write(self.wake_w, b"\x01")
        except OSError:
            pass  # the pipe is full: the reader is about to wake anyway

    # ------------------------------------------------------------------ one-way messages

    def queue_oneway(self, kind: int, body: bytes) -> None:
        """Queue a message for the reader thread to send (safe from ``__del__``)."""
        self.oneway.append((kind, body))
        self.wake_reader()

    def flush_oneway(self, nonblocking: bool = False) -> bool:
        """Send the queued one-way messages in order. False when the socket was full
        (``nonblocking``): the rest stays queued."""
        q = self.oneway
        while q:
            try:
                kind, body = q.popleft()
            except IndexError:
                break
            try:
                self.async_.send(kind, body, nonblocking=nonblocking)
            except BlockingIOError:
                q.appendleft((kind, body))
                return False
            except OSError:
                q.clear()  # the backend is gone, and with it what they would delete
                return True
        return True

    # ------------------------------------------------------------------ open requests

    def watch_open(self, request: object) -> None:
        """``request`` got no response in its RESULT: its sender must still send FINAL (or,
        rescheduled in decoupled mode, may still send). Once the request and its sender are
        both garbage-collected without FINAL, the backend is told (SENDER_DROPPED, or the
        error of fail_on_drop): it ends the request so the client is not left waiting
        forever, or, for a rescheduled execution, lets go of what it kept for the sender."""
        token = request._token  # type: ignore[attr-defined]
        with self._open_lock:
            self._open.setdefault(token, 0)  # a harness reuses a rescheduled request's token
            self._watch(request, token)
            sender = request._sender  # type: ignore[attr-defined]
            if sender is not None:
                self._watch(sender, token)
        if sender is not None and sender._closed:
            self.request_finished(token)  # FINAL went out from another thread meanwhile

    def watch_sender(self, request: object, sender: object) -> None:
        """A watched request made its sender (a thread may now hold only the sender)."""
        token = request._token  # type: ignore[attr-defined]
        with self._open_lock:
            if token in self._open:
                self._watch(sender, token)

    def _watch(self, obj: object, token: int) -> None:
        r = _WatchRef(obj, self._on_watched_dead)
        r.token = token
        self._watch_refs[id(r)] = r
        self._open[token] += 1

    def request_finished(self, token: int) -> None:
        """FINAL went out for ``token``."""
        if self._open:
            with self._open_lock:
                self._open.pop(token, None)
                if self._drop_errors:
                    self._drop_errors.pop(token, None)

    def fail_on_drop(self, sender: object, text: str) -> None:
        """If ``sender`` (still open) and its request are garbage-collected without FINAL,
        its client gets the error ``text`` instead of the backend's generic dropped-sender
        text: a decoupled ``async def execute`` raised after the model took this sender
        (stub/async_execute.py). The SEND body is built here, so the garbage collector's
        callback only queues it."""
        token = sender._token  # type: ignore[attr-defined]
        data = text.encode("utf-8")
        if len(data) > _DROP_TEXT_MAX:
            text = data[:_DROP_TEXT_MAX].decode("utf-8", "ignore") + "... (cut)"
        error = codec.ResponseDesc((), "", (ErrorCode.INTERNAL, text), fails=True)
        body = bytes(codec.encode_send(token, _FINAL, error))
        with self._open_lock:
            # FINAL sets _closed before it goes out and request_finished (under this lock)
            # follows it: an entry made here while the sender is open is always removed.
            if not sender._closed:  # type: ignore[attr-defined]
                self._drop_errors[token] = body

    def _watched_dead(self, r: _WatchRef) -> None:
        with self._open_lock:
            self._watch_refs.pop(id(r), None)
            n = self._open.get(r.token)
            if n is None:
                return
            if n > 1:
                self._open[r.token] = n - 1
                return
            del self._open[r.token]
            error = self._drop_errors.pop(r.token, None) if self._drop_errors else None
        if error is not None:  # the failure the model's execute raised (fail_on_drop)
            self.queue_oneway(MessageKind.SEND, error)
        else:
            self.queue_oneway(MessageKind.SENDER_DROPPED, rpc_codec.encode_token(r.token))

    # ------------------------------------------------------------------ shared handling

    def handle_common(self, msg: Message) -> bool:
        """FREE / SEGMENT_ADD / SEGMENT_DROP / REPLY, which may arrive on either channel.
        Returns False for any other kind."""
        kind = msg.kind
        try:
            if kind == MessageKind.FREE:
                owner, blocks = codec.decode_free(msg.body)
                if owner != Owner.STUB:
                    raise codec.ProtocolError(f"FREE for owner {owner} reached the stub")
                self.ledger.returned(blocks)
            elif kind == MessageKind.SEGMENT_ADD:
                owner, seg, size = codec.decode_segment_add(msg.body)
                if owner != Owner.BACKEND or len(msg.fds) != 1:
                    raise codec.ProtocolError(
                        f"SEGMENT_ADD with owner {owner} and {len(msg.fds)} fds "
                        "(expected backend, one fd)"
                    )
                fd = msg.fds.pop()
                self.peer.add(seg, size, fd)
            elif kind == MessageKind.SEGMENT_DROP:
                owner, seg = codec.decode_segment_drop(msg.body)
                if owner != Owner.BACKEND:
                    raise codec.ProtocolError(f"SEGMENT_DROP for owner {owner} reached the stub")
                self.peer.drop(seg)
            elif kind == MessageKind.REPLY:
                self._resolve(msg.id, msg.body)
            else:
                handler = self.handlers.get(kind)
                if handler is None:
                    return False
                handler(msg)
        except codec.ProtocolError as e:
            self.log.here(
                WARNING, f"pybackend stub '{self.instance}': ignoring bad message {kind}: {e}"
            )
        finally:
            for fd in msg.fds:
                os.close(fd)
            msg.fds = []
        return True

    # ------------------------------------------------------------------ RPC

    def rpc(self, kind: int, body: codec.Buffer, timeout: float = RPC_TIMEOUT_S) -> memoryview:
        """Send a request on the async channel and wait for its REPLY payload."""
        if self.dead:
            raise RpcError(1, "the backend is gone")
        if self.forked:
            raise RpcError(1, fork_refusal(self.instance, "This call"))
        rid = next(self._rpc_ids)
        pending = _Pending()
        with self._rpc_lock:
            self._rpcs[rid] = pending
        try:
            self.async_.send(kind, body, rid)
            if not pending.event.wait(timeout):
                raise RpcError(4, f"no reply from the backend within {timeout:g} s")
        finally:
            with self._rpc_lock:
                self._rpcs.pop(rid, None)
        assert pending.result is not None
        ok, code, message, payload = pending.result
        if not ok:
            raise RpcError(code, message)
        return memoryview(payload)

    def _resolve(self, rid: int, body: memoryview) -> None:
        ok, code, message, payload = codec.decode_reply(body)
        with self._rpc_lock:
            pending = self._rpcs.get(rid)
        if pending is not None:
            pending.result = (ok, code, message, bytes(payload))
            pending.event.set()

    def fail_rpcs(self) -> None:
        self.dead = True
        with self._rpc_lock:
            pendings = list(self._rpcs.values())
        for p in pendings:
            p.result = (False, 4, "the backend closed the channel", b"")
            p.event.set()
        for hook in self.dead_hooks:
            hook()

    def close(self) -> None:
        for ch in (self.sync, self.async_):
            try:
                ch.close()
            except OSError:
                pass
