"""Ctrl-C for ``Triton.serve()`` as a request to stop, not an exception.

Python turns SIGINT into a KeyboardInterrupt raised at whatever bytecode the main thread runs
next. serve()'s loop polls tritonserver (``Popen.poll``), and an interrupt landing between
that call's lock acquire and its ``try`` leaves ``Popen``'s wait lock held: stopping the
server would then wait on it forever (a narrow window, never observed; a hang that looked
like it was a test run that inherited SIGINT ignored). So while serve() waits, SIGINT only
calls ``on_sigint`` (which sets a flag and wakes the loop). Only where Python's own handler
is installed and only in the main thread: a handler of the user's stays theirs, and the
KeyboardInterrupt path still works for them.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Callable, Iterator


@contextlib.contextmanager
def sigint_calls(on_sigint: Callable[[], None]) -> Iterator[None]:
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    signal.signal(signal.SIGINT, lambda _signum, _frame: on_sigint())
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
