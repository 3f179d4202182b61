"""serve()'s Ctrl-C: while it waits, SIGINT calls back instead of raising KeyboardInterrupt at
an arbitrary bytecode (pybackend/pytriton/_sigint.py says why). The end-to-end Ctrl-C of a
serving script is tests/pytriton/test_lifecycle.py::test_example_script_serves_until_ctrl_c."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from pybackend.pytriton._sigint import sigint_calls


@pytest.fixture(autouse=True)
def python_default_sigint():
    """Python's own SIGINT handler, whatever this run inherited: a shell that starts a job
    in the background (`cmd &`) hands it SIGINT ignored, and Python then keeps ignoring it."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_sigint_calls_back_instead_of_raising_and_the_handler_is_restored() -> None:
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    calls: list = []
    with sigint_calls(lambda: calls.append(True)):
        os.kill(os.getpid(), signal.SIGINT)  # no KeyboardInterrupt reaches this frame
    assert calls == [True]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_of_the_users_stays_theirs() -> None:
    theirs: list = []
    previous = signal.signal(signal.SIGINT, lambda *_: theirs.append(True))
    try:
        ours: list = []
        with sigint_calls(lambda: ours.append(True)):
            os.kill(os.getpid(), signal.SIGINT)
            assert signal.getsignal(signal.SIGINT) is not signal.default_int_handler
        assert theirs == [True] and ours == []
    finally:
        signal.signal(signal.SIGINT, previous)


def test_outside_the_main_thread_nothing_is_installed() -> None:
    seen: list = []

    def run() -> None:
        with sigint_calls(lambda: None):
            seen.append(signal.getsignal(signal.SIGINT))

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == [signal.default_int_handler]
