"""A Python stand-in for libtriton_python.so: spawns ``python -m pybackend.stub`` with two
SEQPACKET socketpairs and speaks docs/protocol.md to it, so a model (or the stub itself) runs
in a real stub process without tritonserver (stub_launch.py: how the process starts;
stub_tensors.py: tensors to and from it). :class:`StubModel` builds on it; the stub's own
tests drive it message by message."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..ipc import codec, rpc_codec
from ..ipc.arena import Arena
from ..ipc.channel import Channel, ChannelClosed
from ..ipc.peer_segments import PeerSegments
from ..ipc.protocol import GPU_HOLD_SEG, PROTOCOL_VERSION, Location, MessageKind, Owner, ResultKind
from .statistics import ExecuteTimes
from .stub_launch import (
    PACKAGE_ROOT,
    init_args,
    start_on_fds_3_and_4,
    stub_environment,
)
from .stub_tensors import GpuCopies, input_desc, response_dict, wire_array

PIPE_DRAIN_S = 2.0  # how long closing waits for the end of the stub's stdout and stderr


class StubDriver:
    """One stub process and both its channels, the backend's side of them."""

    def __init__(
        self,
        instance: str = "m_0_0",
        env: Optional[Dict[str, str]] = None,
        inline_threshold: int = 4096,
        python: str = sys.executable,
        cwd: Optional[Path] = None,
        unset: Sequence[str] = (),
        attached: Optional[Tuple[socket.socket, socket.socket, Any]] = None,
    ) -> None:
        """``attached``: the channels of an instance a host process serves and that
        process (stub_host.HostedProcess), instead of a stub process of its own."""
        self.instance = instance
        self.inline_threshold = inline_threshold
        self.proc: Any
        if attached is not None:  # an instance of a host process (stub_host.py)
            sync_b, async_b, self.proc = attached
        else:
            sync_b, sync_s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            async_b, async_s = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
            child_env = stub_environment(
                env or {},
                unset,
                PYBACKEND_SYNC_FD="3",
                PYBACKEND_ASYNC_FD="4",
                PYBACKEND_INSTANCE=instance,
            )
            # Like the real backend: the channels are fds 3 and 4 of the stub.
            self.proc = start_on_fds_3_and_4(
                [python, "-m", "pybackend.stub", "--instance", instance],
                sync_s.fileno(),
                async_s.fileno(),
                child_env,
                cwd or PACKAGE_ROOT,
            )
            sync_s.close()
            async_s.close()
        self.peer = PeerSegments()
        self.arena = Arena(Owner.BACKEND, 1 << 20, 1 << 20, announce=self._announce)
        self.sync = Channel(sync_b, self._indirect_out, self._indirect_in)
        self.async_ = Channel(async_b, self._indirect_out, self._indirect_in)
        self.logs: List[Tuple[int, int, str, str]] = []
        self.sends: List[Tuple[int, int, Optional[Dict[str, Any]]]] = []
        self.frees_received: List[Tuple[int, int]] = []
        self.processed = 0
        self.cancelled_tokens: set = set()
        # Handlers of further async kinds (BLS, model control): kind -> fn(msg).
        self.handlers: Dict[int, Any] = {}
        # Handlers of requests the stub makes on sync while execute waits for RESULT
        # (BLS_EXEC from the thread running execute): kind -> fn(msg).
        self.sync_handlers: Dict[int, Any] = {}
        self.dropped: List[int] = []  # SENDER_DROPPED tokens
        # Called on the reader thread for each SEND (token, flags, the response or None)
        # before the stub's next message is read, so a cancel decided here is seen by its
        # next IS_CANCELLED; returning True takes the SEND (it is not kept in `sends`).
        self.on_send: Optional[Callable[[int, int, Optional[Dict[str, Any]]], bool]] = None
        self.cond = threading.Condition()
        self.async_closed = False
        self.pending_stub_frees: List[Tuple[int, int]] = []
        self._gpu = GpuCopies()
        #: Threads that read the stub's stdout and stderr (its user's): closing waits for
        #: them to reach the end of the pipes, so what finalize printed is not lost.
        self.pipe_readers: List[threading.Thread] = []
        self.reader = threading.Thread(target=self._read_async, daemon=True)
        self.reader.start()

    # ------------------------------------------------------------------ plumbing

    def _announce(self, seg: int, size: int, fd: int) -> None:
        self.sync.send(
            MessageKind.SEGMENT_ADD, codec.encode_segment_add(Owner.BACKEND, seg, size), fds=[fd]
        )

    def _indirect_out(self, body: Any) -> Tuple[int, int]:
        mv = memoryview(body).cast("B")
        seg, off = self.arena.alloc(mv.nbytes)
        self.arena.write(seg, off, mv)
        return seg, off

    def _indirect_in(self, seg: int, off: int, length: int) -> bytes:
        mm = self.peer.get(seg, off, length)
        data = mm[off : off + length]
        self.pending_stub_frees.append((seg, off))
        return data

    def _read_async(self) -> None:
        while True:
            try:
                msg = self.async_.recv()
            except (ChannelClosed, OSError):
                with self.cond:
                    self.async_closed = True
                    self.cond.notify_all()
                return
            kind = msg.kind
            if kind == MessageKind.LOG:
                self.logs.append(codec.decode_log(msg.body))
            elif kind == MessageKind.SEGMENT_ADD:
                owner, seg, size = codec.decode_segment_add(msg.body)
                assert owner == Owner.STUB
                self.peer.add(seg, size, msg.fds.pop())
            elif kind == MessageKind.SEGMENT_DROP:
                owner, seg = codec.decode_segment_drop(msg.body)
                self.peer.drop(seg)
            elif kind == MessageKind.FREE:
                self._on_free(msg.body)
            elif kind == MessageKind.SEND:
                token, flags, resp = codec.decode_send(msg.body)
                got = None if resp is None else self._materialize(resp)
                if self.on_send is None or not self.on_send(token, flags, got):
                    self.sends.append((token, flags, got))
            elif kind == MessageKind.SENDER_DROPPED:
                token = rpc_codec.decode_token(msg.body)
                self.dropped.append(token)
            elif kind in self.handlers:
                self.handlers[kind](msg)
            elif kind == MessageKind.IS_CANCELLED:
                token = rpc_codec.decode_token(msg.body)
                payload = b"\x01" if token in self.cancelled_tokens else b"\x00"
                try:
                    self.async_.send(
                        MessageKind.REPLY, codec.encode_reply(True, payload=payload), msg.id
                    )
                except (ChannelClosed, OSError):
                    pass  # the stub (or close()) shut the channel: the next recv ends the loop
            with self.cond:
                self.processed += 1
                self.cond.notify_all()

    def wait_async(self, count: int, timeout: float = 10.0) -> None:
        with self.cond:
            if not self.cond.wait_for(
                lambda: self.processed >= count or self.async_closed, timeout
            ):
                raise TimeoutError(f"async channel: processed {self.processed} of {count}")

    def _tensor_bytes(self, td: codec.TensorDesc) -> bytes:
        if td.location == Location.INLINE:
            return bytes(td.data)  # type: ignore[arg-type]
        if td.location == Location.STUB_ARENA:
            mm = self.peer.get(td.seg, td.offset, td.byte_size)
            data = mm[td.offset : td.offset + td.byte_size] if td.byte_size else b""
            self.pending_stub_frees.append((td.seg, td.offset))
            return data
        if td.location == Location.BACKEND_ARENA:
            return bytes(self.arena.buffer(td.seg, td.offset, td.byte_size))
        if td.location == Location.GPU_IPC:
            ref: Any = td.data
            self.pending_stub_frees.append((GPU_HOLD_SEG, ref.hold))  # goes back as our blocks do
            return self._gpu.copy(td)
        raise AssertionError(td)

    def _materialize(self, resp: codec.ResponseDesc) -> Dict[str, Any]:
        return response_dict(resp, self.array_of)

    def array_of(self, td: codec.TensorDesc) -> np.ndarray:
        """A tensor the stub sent (an output, a BLS input), copied out of shared memory."""
        return wire_array(self._tensor_bytes(td), td.dtype, td.dims)

    def _flush_stub_frees(self) -> None:
        if self.pending_stub_frees:
            blocks, self.pending_stub_frees = self.pending_stub_frees, []
            self.sync.send(MessageKind.FREE, codec.encode_free(Owner.STUB, blocks))

    def _on_free(self, body: memoryview) -> None:
        owner, blocks = codec.decode_free(body)
        assert owner == Owner.BACKEND
        self._free_blocks(blocks)

    def _free_blocks(self, blocks: List[Tuple[int, int]]) -> None:
        for seg, off in blocks:
            self.arena.decref(seg, off)
            self.frees_received.append((seg, off))

    # ------------------------------------------------------------------ protocol steps

    def hello(self) -> Tuple[int, int, str, str]:
        msg = self.sync.recv()
        assert msg.kind == MessageKind.HELLO, msg
        hello = codec.decode_hello(msg.body)
        assert hello[0] == PROTOCOL_VERSION
        return hello

    def init(
        self,
        model_file: Path,
        config: Optional[dict] = None,
        phase: str = "initialize",
        decoupled: bool = False,
        **extra: Any,
    ) -> Dict[str, Any]:
        args = init_args(
            Path(model_file), config, phase, decoupled, self.instance, self.inline_threshold
        )
        args.update(extra)
        self.sync.send(MessageKind.INIT, codec.encode_json(args))
        msg = self.sync.recv()
        assert msg.kind == MessageKind.INIT_REPLY, msg
        reply = codec.decode_json(msg.body)
        # As the backend does: the lines initialize logged (async) are handled first.
        self.wait_async(reply["async_seq"])
        return reply

    def make_input(
        self, name: str, value: np.ndarray, arena: Optional[bool] = None
    ) -> codec.TensorDesc:
        return input_desc(self.arena, name, value, arena, self.inline_threshold)

    def execute(
        self,
        requests: Sequence[Dict[str, np.ndarray]],
        batch_id: int = 1,
        arena: Optional[bool] = None,
        requested: Optional[Sequence[Sequence[str]]] = None,
        request_kwargs: Optional[Sequence[Dict[str, Any]]] = None,
        times: Optional[ExecuteTimes] = None,
    ) -> Dict[str, Any]:
        """Run one batch; returns {"error": (code, msg)} or {"items": [...]} where each
        item is None or a materialized response dict. ``times`` gets the marks the backend
        takes: inputs in shared memory, RESULT read."""
        descs = []
        for i, inputs in enumerate(requests):
            kw = dict(request_kwargs[i]) if request_kwargs else {}
            descs.append(
                codec.RequestDesc(
                    token=kw.pop("token", 1000 + i),
                    request_id=kw.pop("request_id", f"r{i}"),
                    requested_outputs=list(requested[i]) if requested else [],
                    inputs=[self.make_input(n, v, arena) for n, v in inputs.items()],
                    **kw,
                )
            )
        # Like the real backend: the batch's input blocks stay pinned until the outputs are
        # read, as the stub returns them with RESULT (its freed trailer).
        pins = [
            (t.seg, t.offset)
            for d in descs
            for t in d.inputs
            if t.location == Location.BACKEND_ARENA
        ]
        for seg, off in pins:
            self.arena.incref(seg, off)
        # Like the real backend: the stub blocks it has finished with ride in EXECUTE.
        freed, self.pending_stub_frees = self.pending_stub_frees, []
        if times is not None:
            times.mark_inputs_ready()
        self.sync.send(MessageKind.EXECUTE, codec.encode_execute(descs, freed), batch_id)
        msg = self.sync.recv()
        while msg.kind == MessageKind.FREE or msg.kind in self.sync_handlers:
            if msg.kind == MessageKind.FREE:
                self._on_free(msg.body)
            else:
                self.sync_handlers[msg.kind](msg)
            msg = self.sync.recv()
        if times is not None:
            times.mark_returned()
        try:
            return self._finish_execute(msg, batch_id)
        finally:
            for seg, off in pins:
                self.arena.decref(seg, off)

    def _finish_execute(self, msg: Any, batch_id: int) -> Dict[str, Any]:
        assert msg.kind == MessageKind.RESULT, msg
        assert msg.id == batch_id
        result = codec.decode_result(msg.body)
        self._free_blocks(result.freed)
        if result.error is not None:
            return {"error": result.error}
        self.wait_async(result.async_seq)
        items = []
        for kind, flags, resp in result.items:
            if kind == ResultKind.NONE:
                items.append({"none": True, "release_flags": flags})
            else:
                m = self._materialize(resp)  # type: ignore[arg-type]
                m["release_flags"] = flags
                items.append(m)
        return {"items": items}

    def finalize(self, timeout: float = 10.0) -> Dict[str, Any]:
        self._flush_stub_frees()
        self.sync.send(MessageKind.FINALIZE)
        msg = self.sync.recv()
        assert msg.kind == MessageKind.FINALIZE_REPLY, msg
        reply = codec.decode_json(msg.body)
        self.proc.wait(timeout)
        # Like the real backend's monitor: handle everything the stub sent on async before
        # it exited (finalize's LOG lines, counted in the reply's async_seq, and the last
        # FREEs, sent after the reply) before calling the stub finalized: the EOF comes last.
        with self.cond:
            if not self.cond.wait_for(lambda: self.async_closed, timeout):
                raise TimeoutError(f"async channel still open {timeout:g} s after the stub exited")
        return reply

    def close(self) -> None:
        for ch in (self.sync, self.async_):
            try:
                ch.sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        # The stub sends its last FREEs on async after FINALIZE_REPLY (on the way out): the
        # reader may still be handling them. It must be done before the arena goes, or a
        # FREE lands in an emptied arena ("FREE for unknown segment") and the exception of
        # the reader thread is reported in whichever test runs next.
        self.reader.join(10)
        for thread in self.pipe_readers:
            thread.join(PIPE_DRAIN_S)  # bounded: a child the model started may hold the pipe
        for ch in (self.sync, self.async_):
            ch.close()
        self.arena.close()
        self.peer.close()
        if self.proc.stdout:
            self.proc.stdout.close()
        if self.proc.stderr:
            self.proc.stderr.close()

    def stderr_text(self) -> str:
        assert self.proc.stderr is not None
        return self.proc.stderr.read().decode(errors="replace")

    def __enter__(self) -> "StubDriver":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
