"""The serving commands stop on SIGTERM and SIGINT (pybackend/cli/stop_signals.py) even when
the kernel hands the signal to another of their threads, as it may for a signal sent to the
process: gRPC's threads in `pybackend openai` took it, and a main thread asleep for an hour
then stopped an hour late. Here a thread of the process directs the signal at itself."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent(
    """
    import signal, sys, threading, time
    from pybackend.cli.stop_signals import stop_on_signals, wait_for_stop

    stop_on_signals()

    def other_thread():
        time.sleep(0.3)  # the main thread is asleep in wait_for_stop by now
        signal.pthread_kill(threading.get_ident(), signal.{name})

    threading.Thread(target=other_thread).start()
    try:
        wait_for_stop()
    except KeyboardInterrupt:
        print("stopped", flush=True)
    """
)


@pytest.mark.parametrize("name", ["SIGTERM", "SIGINT"])
def test_a_signal_taken_by_another_thread_stops_the_command(name: str) -> None:
    # One long sleep in place of wait_for_stop() runs into the timeout.
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM.replace("{name}", name)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "stopped\n"
