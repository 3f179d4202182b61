"""The route of a process that model.py forked (fork_route.py): both of its ends.

The child keeps one end of a private socketpair and sends its BLS calls there
(:class:`ForkedBlsClient`), inputs and outputs inline; the parent serves the other end on a
thread (:class:`RouteServer`), starting each call with its own BLS client and streaming the
responses back. The route is stream-framed: ``u32 body length, u8 kind, u64 call id`` then
the body (kind EXEC: a BLS_EXEC body; CANCEL: empty; RESPONSE: a BLS_RESPONSE body), every
tensor INLINE (the child maps none of the parent's memory).
"""

from __future__ import annotations

import itertools
import socket
import struct
import threading
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ..ipc.bls_codec import BlsExecDesc, decode_bls_exec, encode_bls_exec, encode_bls_response
from ..ipc.channel import Message
from ..ipc.codec import ResponseDesc, TensorDesc
from ..ipc.protocol import Location, MessageKind
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .bls import BlsClient
from .bls_wire import FINAL, error_response, exec_desc
from .outputs import _bytes_view
from .response_iterator import Call, call_result
from .state import StubState

FRAME = struct.Struct("<IBQ")  # u32 body length, u8 kind, u64 call id
EXEC, CANCEL, RESPONSE = 1, 2, 3
_INLINE = int(Location.INLINE)


def _send_frame(sock: socket.socket, lock: threading.Lock, kind: int, cid: int, body: Any) -> None:
    n = body.nbytes if isinstance(body, memoryview) else len(body)
    with lock:
        sock.sendall(FRAME.pack(n, kind, cid))
        if n:
            sock.sendall(body)


def _recv_exact(sock: socket.socket, n: int) -> Optional[bytearray]:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            return None
        got += k
    return buf


def _frames(sock: socket.socket) -> Iterator[Tuple[int, int, bytearray]]:
    """(kind, call id, body) of each frame until EOF (OSError: the peer died)."""
    while True:
        head = _recv_exact(sock, FRAME.size)
        if head is None:
            return
        n, kind, cid = FRAME.unpack(head)
        body = _recv_exact(sock, n) if n else bytearray()
        if body is None:
            return
        yield kind, cid, body


def _inline(tensor: Any) -> TensorDesc:
    """A request's input or a response's output, its bytes carried in the frame."""
    data = tensor._raw if tensor._raw is not None else tensor._array
    view = _bytes_view(data) if data is not None else memoryview(b"")
    return TensorDesc(tensor._name, tensor._dtype, _INLINE, tensor._shape, view.nbytes, data=view)


def _inline_response(resp: Optional[InferenceResponse]) -> Optional[ResponseDesc]:
    """``resp`` with every output copied inline (the child maps none of our memory)."""
    if resp is None:
        return None
    err = resp._error
    if err is not None:
        return ResponseDesc(parameters=resp._parameters, error=(int(err.code()), err.message()))
    return ResponseDesc([_inline(t) for t in resp._outputs], resp._parameters)


class RouteServer(threading.Thread):
    """The parent's end of one child's route: starts the child's calls with ``client`` and
    pumps their responses back, one thread per call in flight (a call blocks only its own
    thread, and a stream may last as long as the callee wants)."""

    def __init__(
        self,
        sock: socket.socket,
        client: BlsClient,
        log: Callable[[str], None],
        done: Callable[[socket.socket], None],
    ) -> None:
        super().__init__(name="pybackend-fork-route", daemon=True)
        self.sock = sock
        self.done = done
        self.client = client
        self.log = log
        self.lock = threading.Lock()
        self.calls: Dict[int, Call] = {}
        self.gone = False

    def run(self) -> None:
        try:
            for kind, cid, body in _frames(self.sock):
                if kind == EXEC:
                    self._start(cid, body)
                elif kind == CANCEL:
                    call = self.calls.get(cid)
                    if call is not None and not call.final:
                        call.client.cancel(call.cid)
        except OSError:
            pass  # the child died: same as EOF
        finally:
            self.gone = True
            for call in list(self.calls.values()):  # its calls in flight: nobody waits any more
                if not call.final:
                    call.client.cancel(call.cid)
            self.done(self.sock)  # closes it

    def _start(self, cid: int, body: bytearray) -> None:
        try:
            call = self.client.forward(decode_bls_exec(body), None)
        except Exception as e:  # noqa: BLE001 - answered as an error response
            call = Call(self.client, None)
            text = f"the forked process's request could not be started: {e}"
            call.push(error_response(text), True)
        self.calls[cid] = call
        threading.Thread(
            target=self._pump, args=(cid, call), name="pybackend-fork-call", daemon=True
        ).start()

    def _pump(self, cid: int, call: Call) -> None:
        while True:
            resp, final = call.take()
            if not self.gone:
                try:
                    body = encode_bls_response(FINAL if final else 0, _inline_response(resp))
                    _send_frame(self.sock, self.lock, RESPONSE, cid, body)
                except OSError:
                    self.gone = True  # the child is gone; the reader thread cancels its calls
                except Exception as e:  # noqa: BLE001 - the child gets an error instead
                    self.log(f"pybackend stub: a forked process's BLS response dropped: {e}")
                    err = encode_bls_response(FINAL, _inline_response(error_response(str(e))))
                    try:
                        _send_frame(self.sock, self.lock, RESPONSE, cid, err)
                    except OSError:
                        self.gone = True
            del resp  # its blocks go home now, not when the next response comes
            if final:
                self.calls.pop(cid, None)
                return


class ForkedBlsClient(BlsClient):
    """BLS in a forked child: every call goes through the route to the parent."""

    def __init__(self, state: StubState, sock: socket.socket, where: str) -> None:
        # No BlsClient.__init__: the child registers nothing with the inherited state.
        self.state = state
        self.sock = sock
        self.where = where
        self._ids = itertools.count(1)
        self._calls: Dict[int, Call] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._reader: Optional[threading.Thread] = None
        self._closed = False

    def exec(self, request: InferenceRequest, decoupled: bool) -> Any:
        return call_result(self._start(request, decoupled, None), decoupled)

    def _start(
        self, request: InferenceRequest, decoupled: bool, waiter: Optional[Callable[[], None]]
    ) -> Call:
        inputs = [_inline(t) for t in request._inputs]
        return self.forward(exec_desc(request, decoupled, inputs), waiter)

    def forward(self, desc: BlsExecDesc, waiter: Optional[Callable[[], None]]) -> Call:
        call = Call(self, waiter)
        cid = call.cid = next(self._ids)
        with self._lock:
            closed = self._closed
            if not closed:
                self._calls[cid] = call
                if self._reader is None:
                    self._reader = threading.Thread(
                        target=self._read, name="pybackend-fork-route-reader", daemon=True
                    )
                    self._reader.start()
        if closed:
            call.push(self._gone(), True)
            return call
        try:
            _send_frame(self.sock, self._send_lock, EXEC, cid, encode_bls_exec(desc))
        except OSError:
            with self._lock:
                self._calls.pop(cid, None)
            call.push(self._gone(), True)
        return call

    def cancel(self, cid: int) -> None:
        try:
            _send_frame(self.sock, self._send_lock, CANCEL, cid, b"")
        except OSError:
            pass  # the parent is gone: the call fails anyway

    def _read(self) -> None:
        try:
            for kind, cid, body in _frames(self.sock):
                if kind == RESPONSE:
                    msg = Message(MessageKind.BLS_RESPONSE, 0, cid, memoryview(body), [])
                    self._on_response(msg)
        except OSError:
            pass
        with self._lock:
            self._closed = True
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.push(self._gone(), True)

    def _gone(self) -> InferenceResponse:
        return error_response(
            f"the process that forked this one ({self.where}) closed the route BLS calls of a "
            "forked process take; it exited or died"
        )

    def _fail_all(self) -> None:  # pragma: no cover - never registered in the child
        pass


__all__: List[str] = ["ForkedBlsClient", "RouteServer"]
