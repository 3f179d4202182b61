"""The stub's main loop. The main thread reads the sync channel itself (no hand-off to
another thread on the hot path) and answers HELLO/INIT/EXECUTE/FINALIZE in order."""

from __future__ import annotations

import gc
import json
import logging
import os
import platform
import sys
import traceback
from typing import Any, Dict, NoReturn, Optional

import numpy as np

from ..ipc import codec
from ..ipc.channel import ChannelClosed
from ..ipc.lane import Lane
from ..ipc.protocol import DEFAULT_INLINE_THRESHOLD, PROTOCOL_VERSION, MessageKind
from ..utils import transport as utils_transport
from . import debug, host_output, loader
from .async_execute import cancel_on_client_cancel, concurrency_limit
from .dispatch import Dispatcher
from .failures import failed_requests_text, finalize_failed_text
from .fork_route import ForkRoute
from .logging import ERROR, INFO, WARNING, RecordForwarder
from .parameters import ParameterError
from .reader import Reader
from .returns import OutputRules, strict_outputs
from .state import StubState
from .tracebacks import MODEL_ERRORS, format_exception
from .transport import StubTransport


class Stub:
    # After a successful INIT, keep everything imported so far out of the cyclic collector
    # (a stub process lives as long as its model; an attached process does not).
    freeze_gc = True
    # The reader thread ends the process when the backend goes (a stub has no other use).
    exit_with_backend = True

    def __init__(self, sync_fd: int, async_fd: int, instance: str) -> None:
        self.instance = instance
        self.state = StubState(sync_fd, async_fd, instance)
        self.transport = StubTransport(self.state)
        self.dispatcher: Optional[Dispatcher] = None
        self.model: Any = None
        self.reader: Optional[Reader] = None

    # ------------------------------------------------------------------ loop

    def run(self) -> NoReturn:
        utils_transport.set_transport(self.transport)
        ForkRoute.for_stub(self.transport, self.state)
        # Processes that model.py starts with multiprocessing's spawn/forkserver inherit this
        # and can say where they come from when they try BLS (utils/transport.py).
        os.environ[utils_transport.STUB_INSTANCE_ENV] = self.instance
        logging.lastResort = RecordForwarder(self.state.log)
        self.serve()
        run_exit_handlers()
        self._exit(0)

    def serve(self) -> None:
        """HELLO, then every sync message until FINALIZE or the backend's end."""
        self.state.sync.send(
            MessageKind.HELLO,
            codec.encode_hello(
                PROTOCOL_VERSION, os.getpid(), platform.python_version(), np.__version__
            ),
        )
        try:
            self._serve()
        except ChannelClosed:
            pass  # the backend is gone (EOF, or EPIPE on a reply)

    def _serve(self) -> None:
        st = self.state
        sync = st.sync
        spin_s = st.spin_s
        while True:
            try:
                msg = sync.recv(spin_s)
            except codec.ProtocolError as e:
                st.log.here(
                    ERROR, f"pybackend stub '{self.instance}': bad message on the sync channel: {e}"
                )
                continue
            kind = msg.kind
            dispatcher = self.dispatcher
            if dispatcher is not None:
                # The backend has read everything the previous RESULT referenced.
                dispatcher.keepalive = None
            if kind == MessageKind.EXECUTE:
                if dispatcher is None:
                    body = codec.encode_result_error(
                        1,
                        failed_requests_text(
                            self.instance, "the stub received EXECUTE before a successful INIT"
                        ),
                    )
                else:
                    body = dispatcher.execute(msg.body)
                if st.forked:
                    self._forked_child_returned()
                sync.send_fast(MessageKind.RESULT, body, msg.id)
            elif kind == MessageKind.LANE:
                # From now on the backend sleeps on the lane and counts its socket messages.
                sync.lane = Lane(msg.fds.pop())
            elif kind == MessageKind.INIT:
                reply = self._init(msg.body)
                # The async messages sent so far (initialize's LOG lines): the backend
                # handles that many before the load completes (docs/protocol.md).
                reply["async_seq"] = st.async_.sent & 0xFFFFFFFF
                sync.send(MessageKind.INIT_REPLY, codec.encode_json(reply), msg.id)
            elif kind == MessageKind.FINALIZE:
                error = self._finalize()
                done = {"error": error, "async_seq": st.async_.sent & 0xFFFFFFFF}
                sync.send(MessageKind.FINALIZE_REPLY, codec.encode_json(done), msg.id)
                return
            elif not st.handle_common(msg):
                st.log.here(
                    WARNING,
                    f"pybackend stub '{self.instance}': unexpected sync message kind {kind}",
                )

    def _forked_child_returned(self) -> NoReturn:
        """A child that model.py forked (os.fork) returned from execute into the stub's loop:
        its RESULT would mix with the stub's own on the channel it inherited."""
        self.state.log.here(
            ERROR,
            f"A process forked by model.py of instance '{self.instance}' (pid {os.getpid()}) "
            "returned from execute; it exits now. End such a process with os._exit() instead.",
        )
        os._exit(1)

    def _exit(self, code: int) -> NoReturn:
        try:
            self.state.ledger.flush()
        except Exception:  # noqa: BLE001 - best effort on the way out
            pass
        # A fork-mode child's threads' unfinished lines: its exit ends them, as a stub's does.
        host_output.end_instance(None)
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001
                pass
        # os._exit: user threads that never finish must not keep a dead stub around.
        os._exit(code)

    # ------------------------------------------------------------------ INIT

    def _init(self, body: memoryview) -> Dict[str, Any]:
        reply: Dict[str, Any] = {
            "ok": False,
            "error": None,
            "model_config": None,
            "has_is_ready": False,
            "is_async_execute": False,
        }
        phase = "initialize"
        try:
            init = codec.decode_json(body)
            phase = init.get("phase", "initialize")
            os.environ[utils_transport.STUB_MODEL_ENV] = str(init.get("model_name", ""))
            self.transport.phase = phase
            self._configure(init)
            if self.reader is None:
                self.reader = Reader(self.state, self.exit_with_backend)
                self.reader.start()
            debug.start(
                str(init.get("debug") or ""),
                str(init.get("model_name", "")),
                self.instance,
                lambda text: self.state.log.here(WARNING, text),
            )
            module = self._import_model(init)
            if self.freeze_gc:
                freeze_import_heap()
            if phase == "auto_complete":
                reply["model_config"] = loader.auto_complete(module, init)
            else:
                decoupled = bool(init.get("decoupled", False))
                config = init.get("model_config", "")
                if strict_outputs(config):
                    rules = OutputRules(json.loads(config), self.instance, strict=True)
                    self.state.output_rules = rules
                dispatcher = Dispatcher(
                    self.state,
                    None,
                    self.instance,
                    init.get("model_file", ""),
                    decoupled,
                    init.get("model_name", ""),
                    _int(init.get("model_version", -1)),
                    concurrency_limit(init.get("model_config", ""), decoupled),
                    cancel_on_client_cancel(init.get("model_config", "")),
                )
                self.model = self._instantiate(module, init, dispatcher)
                dispatcher.model = self.model
                dispatcher.watch_sequences(json.loads(config) if config else {})
                self.dispatcher = dispatcher
                reply["has_is_ready"] = hasattr(self.model, "is_ready")
                reply["is_async_execute"] = loader.is_async_execute(self.model)
            reply["ok"] = True
        except (loader.LoadError, ParameterError) as e:
            reply["error"] = str(e)
        except MODEL_ERRORS as e:  # model import/initialize may raise anything
            reply["error"] = format_exception(e)
        if not reply["ok"]:
            what = (
                "Failed to initialize Python stub for auto-complete"
                if phase == "auto_complete"
                else ("Failed to initialize Python stub")
            )
            self.state.log.here(ERROR, f"{what}: {reply['error']}")
        return reply

    def _import_model(self, init: Dict[str, Any]) -> Any:
        """The module holding TritonPythonModel (model.py)."""
        return loader.import_model(init)

    def _instantiate(self, module: Any, init: Dict[str, Any], dispatcher: Dispatcher) -> Any:
        """The model object, initialized."""
        return loader.instantiate(module, init, dispatcher.run_coroutine)

    def _configure(self, init: Dict[str, Any]) -> None:
        st = self.state
        st.inline_threshold = _int(init.get("inline_threshold", DEFAULT_INLINE_THRESHOLD))
        if st.arena is None:
            # shm-default-byte-size is the instance's reservation at load, as the original's
            # one region: the backend's first segment. Ours are made as outputs need them,
            # the first of shm-growth-byte-size (or the block's size) staying as the floor
            # (docs/protocol.md, "Tensor data lives in memfd arenas").
            growth = _int(init.get("shm_growth_byte_size", 1 << 20)) or (1 << 20)
            st.make_arena(growth, growth, _int(init.get("shm_max_byte_size", 0)))
        model_file = init.get("model_file", "")
        self.transport.model_dir = init.get("version_dir") or os.path.dirname(model_file)
        if init.get("phase") == "initialize" and init.get("instance_kind") == "GPU":
            self._use_instance_device(_int(init.get("device_id", 0)))

    def _use_instance_device(self, device: int) -> None:
        """A KIND_GPU instance starts on its own device: its primary context is made current
        on the main thread before the model is imported, so torch, cupy and the CUDA runtime
        use that device by default (UV-28). KIND_CPU instances never load the driver here."""
        from ..utils import cuda_driver

        try:
            cuda_driver.driver().make_current(cuda_driver.to_local(device))
        except cuda_driver.CudaError as e:
            self.state.log.here(
                WARNING,
                f"pybackend stub '{self.instance}': could not make GPU {device} the current "
                f"device of this KIND_GPU instance ({e}); the model's libraries choose their "
                "own device",
            )

    # ------------------------------------------------------------------ FINALIZE

    def _finalize(self) -> Optional[str]:
        if self.dispatcher is not None:
            self.dispatcher.stop_loop()
        self.transport.phase = "finalize"  # BLS is refused from here on, as in the original
        model = self.model
        if model is None or not hasattr(model, "finalize"):
            return None
        try:
            model.finalize()
        except MODEL_ERRORS as e:  # reported, then ignored like upstream
            text = format_exception(e)
            self.state.log.here(INFO, finalize_failed_text(self.instance, text))
            return text
        return None


def run_exit_handlers() -> None:
    """What model code registered with ``atexit`` (closing files, stopping workers, a last
    report), run as the original's stub runs it when its interpreter ends after finalize. The
    stub then leaves with os._exit, which runs none: threads that never end must not keep it
    alive. A handler that hangs is the backend's to bound (stub-timeout-seconds, then kill)."""
    import atexit

    atexit._run_exitfuncs()


_import_heap_frozen = False


def freeze_import_heap() -> None:
    """Once per process, right after model.py's first import: what the import built (with
    torch some 165,000 objects: modules, classes, functions) lives as long as the process, and
    out of the cyclic collector's generations a full collection takes microseconds instead of
    ~100 ms. Not what initialize builds: a model that later drops its weights (a refresh, a
    reload) may have them in a reference cycle, which only the collector frees, and frozen
    they would stay in memory for good (the original never freezes)."""
    global _import_heap_frozen
    if not _import_heap_frozen:
        _import_heap_frozen = True
        gc.collect()
        gc.freeze()


def _int(v: Any) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return -1


def run(sync_fd: int, async_fd: int, instance: str) -> NoReturn:
    try:
        Stub(sync_fd, async_fd, instance).run()
    except BaseException:  # noqa: BLE001 - last resort: say why we die
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
