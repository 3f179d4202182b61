"""The model's code as the offline harness runs it: the ``TritonPythonModel`` instance, the
event loop thread its coroutines run on (one, as in the stub), and the mark that says whose
model code runs on a thread (pb_utils' logs and BLS calls go to that harness), the asyncio
loop its code sees outside coroutines, and the ``sys.argv`` a model sees while it loads."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import sys
import threading
from typing import Any, Callable, Iterator, List, Optional, TypeVar

from ..stub.tracebacks import ModelExit, exits_as_errors
from ..utils.process_shared import Registry, bound
from .harness_instances import InstanceThread
from .transport import HarnessTransport

T = TypeVar("T")


class ModelCode:
    """The model instance of ``owner`` (what the transport routes its logs and BLS calls
    to) and where its coroutines run."""

    def __init__(self, owner: Any, transport: HarnessTransport) -> None:
        self._owner = owner
        self._transport = transport
        #: The model's TritonPythonModel instance while the harness runs (None before its
        #: ``initialize`` ran and after close).
        self.model: Any = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._loop_thread: Optional[threading.Thread] = None
        #: The ``pb_utils.shared`` table of the process this instance stands for
        #: (harness_instances.py); None: the process's.
        self.registry: Optional[Registry] = None
        #: The instance's own thread (None: the caller's, one instance in a debug mode).
        self.thread: Optional[InstanceThread] = None
        self.thread_loop = ThreadLoop()

    def running(self) -> "Running":
        """Marks this model's code as running on the calling thread, for the block."""
        return Running(self._transport, self._owner, self.registry, self.thread_loop)

    def on_thread(self, fn: Callable[[], T]) -> T:
        """``fn()`` on the instance's thread (the caller's when it has none). One still in a
        call a timeout gave up on is left to it: a new thread serves from here on (closing's
        ``finalize``; the harness refuses requests while that execute runs)."""
        thread = self.thread
        if thread is None:
            return fn()
        if thread.held_elsewhere():
            thread.stop()  # it ends once that call returns
            thread = self.thread = InstanceThread(thread.name)
        return thread.run(fn)

    def thread_name(self, caller: str) -> str:
        """The name of the thread the instance's code runs on (``caller``, the calling
        thread's name, when it has none of its own)."""
        return caller if self.thread is None else self.thread.name

    def run_marked(self, fn: Callable[[], T]) -> T:
        """``fn()``, the model's code, marked as running (its logs, BLS calls, shared
        table), on the instance's thread."""

        def run() -> T:
            with self.running():
                return fn()

        return self.on_thread(run)

    def stop_thread(self) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None

    def call(self, method: str, *args: Any, settle: bool = True) -> Any:
        """The model's ``method`` (with ``settle``, its coroutine run to its end, as a stub
        runs ``async def initialize``), marked as running, on the instance's thread."""

        def run() -> Any:
            result = getattr(self.model, method)(*args)
            return self.settle(result) if settle else result

        return self.run_marked(run)

    def settle(self, result: Any) -> Any:
        """``result``, or what it returns when it is a coroutine (run on the model's loop)."""
        return self.run(result) if inspect.iscoroutine(result) else result

    def run(self, coro: Any) -> Any:
        """Run a coroutine of the model on its event loop (one thread, like the stub's)."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            registry = self.registry

            def serve() -> None:
                with bound(registry):  # the model's coroutines see its process's table
                    loop.run_forever()

            thread = threading.Thread(target=serve, name="harness-loop", daemon=True)
            thread.start()
            self._loop, self._loop_thread = loop, thread
        try:
            return asyncio.run_coroutine_threadsafe(exits_as_errors(coro), self._loop).result()
        except ModelExit as e:
            raise e.exc from None  # the model's own SystemExit/KeyboardInterrupt, here

    def stop_loop(self) -> None:
        """The event loop thread ends (a later coroutine starts a new one), and the loop
        asyncio gave the model's code outside coroutines is closed."""
        self.thread_loop.close()
        if self._loop is None:
            return
        loop, thread = self._loop, self._loop_thread
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(5)
        if not loop.is_running():
            loop.close()
        self._loop = self._loop_thread = None


# Python 3.14 makes no loop where none is set: a stub's model code gets none either.
_MAKES_A_LOOP = sys.version_info < (3, 14)


class ThreadLoop:
    """What ``asyncio.get_event_loop()`` gives the instance's code outside its coroutines. A
    stub runs ``initialize`` and ``execute`` on its main thread, where asyncio makes a loop
    the first time one is asked for, and keeps the one ``asyncio.set_event_loop`` sets; the
    harness runs them on the instance's thread, where asyncio makes none, so that thread's
    current loop is this instance's for the call: made when first needed, and what the model
    left current is kept for its next call."""

    def __init__(self) -> None:
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._made: Optional[asyncio.AbstractEventLoop] = None  # ours, closed with the model

    def enter(self) -> bool:
        """Make it current on this thread (False: nothing done, the main thread's own
        asyncio applies there)."""
        if not _MAKES_A_LOOP or threading.current_thread() is threading.main_thread():
            return False
        if self._loop is None:
            self._loop = self._made = asyncio.new_event_loop()
        asyncio.set_event_loop(self._loop)
        return True

    def leave(self) -> None:
        try:  # the model may have set a loop of its own: its next call gets that one
            # (the policy's getter: asyncio.get_event_loop() warns on some 3.10/3.11 releases)
            self._loop = asyncio.get_event_loop_policy().get_event_loop()
        except RuntimeError:  # it set None
            self._loop = None
        asyncio.set_event_loop(None)

    def close(self) -> None:
        made, self._made, self._loop = self._made, None, None
        if made is not None and not made.is_running() and not made.is_closed():
            made.close()


class Running:
    """Marks the harness whose model code runs on this thread (for logs and BLS), and the
    ``pb_utils.shared`` table its code sees."""

    def __init__(
        self,
        transport: HarnessTransport,
        harness: Any,
        registry: Optional[Registry] = None,
        thread_loop: Optional[ThreadLoop] = None,
    ) -> None:
        self._transport = transport
        self.harness = harness
        self.previous: Any = None
        self._bound = bound(registry)
        self._thread_loop = thread_loop
        self._loop_entered = False

    def __enter__(self) -> None:
        local = self._transport.local
        self.previous = getattr(local, "harness", None)
        local.harness = self.harness
        self._bound.__enter__()
        # Not when nested (a BLS call to the model itself runs inline on this thread).
        if self._thread_loop is not None and self.previous is None:
            self._loop_entered = self._thread_loop.enter()

    def __exit__(self, *exc: object) -> None:
        if self._loop_entered:
            self._thread_loop.leave()  # type: ignore[union-attr]
        self._bound.__exit__(None, None, None)
        self._transport.local.harness = self.previous


_argv_lock = threading.Lock()
_argv_loads = 0  # loads running now (instances of a model load on threads of their own)
_argv_saved: List[str] = []


@contextlib.contextmanager
def stub_argv() -> Iterator[None]:
    """``sys.argv`` is ``['']`` while a model loads in this process, as in a stub process
    (the original's embedded interpreter): a model that parses its arguments at import or in
    ``initialize`` (argparse's ``parse_args()``) gets its defaults, not pytest's arguments.
    The test's own list is back once the last load running ends."""
    global _argv_loads, _argv_saved
    with _argv_lock:
        if _argv_loads == 0:
            _argv_saved = sys.argv
            sys.argv = [""]
        _argv_loads += 1
    try:
        yield
    finally:
        with _argv_lock:
            _argv_loads -= 1
            if _argv_loads == 0:
                sys.argv = _argv_saved
