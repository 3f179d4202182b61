"""The stub process of a :class:`StubModel`: started with its output read as it comes,
stopped without hanging on a stub that no longer answers, killed when an execute outlives
its limit, and what to say when it died."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..ipc.channel import ChannelClosed
from .harness_bounds import STOP_TIMEOUT_S
from .stub_driver import StubDriver
from .stub_host import HostedProcess, StubHost, drain_lines


def spawn_stub(
    instance_name: str,
    env: Dict[str, str],
    python: str,
    unset: Sequence[str],
    output: List[str],
    hello_timeout: Optional[float] = None,
) -> StubDriver:
    """A stub process that said HELLO (within ``hello_timeout`` seconds when given: it is
    killed past them, and TimeoutError raised); its stdout and stderr lines go to
    ``output``."""
    driver = StubDriver(
        instance_name,
        env=env,
        python=python,
        cwd=Path(os.getcwd()),
        unset=unset,
    )
    for stream in (driver.proc.stdout, driver.proc.stderr):
        # Read as it comes: a stub that prints more than a pipe holds must not block.
        thread = threading.Thread(target=drain_lines, args=(stream, output), daemon=True)
        thread.start()
        driver.pipe_readers.append(thread)
    return _greeted(driver, hello_timeout)


def attach_stub(
    host: StubHost,
    instance_name: str,
    init: Dict[str, Any],
    hello_timeout: Optional[float] = None,
) -> StubDriver:
    """An instance served by ``host`` (a thread of it, or its forked child) that said
    HELLO (within ``hello_timeout``, as :func:`spawn_stub`); the host's output goes where
    the host was told to put it."""
    sync, async_, pid = host.attach(instance_name, init)
    proc = HostedProcess(host, pid)
    driver = StubDriver(instance_name, attached=(sync, async_, proc))
    proc.channels_closed = lambda: driver.async_closed
    return _greeted(driver, hello_timeout)


def _greeted(driver: StubDriver, timeout: Optional[float] = None) -> StubDriver:
    """``driver`` once its stub said HELLO (within ``timeout`` seconds, when given: killed
    past them, TimeoutError); closed if it did not."""
    watchdog = None if timeout is None else Watchdog(timeout, driver)
    try:
        driver.hello()
    except BaseException:
        driver.close()
        if watchdog is not None and watchdog.fired:
            raise TimeoutError(f"no HELLO from the stub within {timeout:g} s") from None
        raise
    finally:
        if watchdog is not None:
            watchdog.cancel()
    return driver


def shutdown_stub(driver: StubDriver) -> None:
    """``finalize``, then close the driver (which waits for the process to exit)."""
    # A stub still busy in execute (or hung in finalize) never answers FINALIZE: it is
    # killed after STOP_TIMEOUT_S so that closing the model cannot hang the test run.
    timer = threading.Timer(STOP_TIMEOUT_S, kill_stub, args=(driver,))
    timer.daemon = True
    timer.start()
    try:
        if driver.proc.poll() is None:
            driver.finalize()
    except (ChannelClosed, OSError, TimeoutError, AssertionError):
        pass  # it died or hung in finalize: close() below ends it either way
    finally:
        timer.cancel()
        driver.close()


def kill_stub(driver: StubDriver) -> None:
    """SIGKILL to the stub (its channels close, so every wait on them ends)."""
    try:
        driver.proc.kill()
    except OSError:
        pass  # already gone


class Watchdog:
    """Kills the stub when an execute outlives its limit (the wait then ends: the channel
    closes)."""

    def __init__(self, seconds: float, driver: StubDriver) -> None:
        self.fired = False
        self._timer = threading.Timer(seconds, self._fire, args=(driver,))
        self._timer.daemon = True
        self._timer.start()

    def _fire(self, driver: StubDriver) -> None:
        self.fired = True
        kill_stub(driver)

    def cancel(self) -> None:
        self._timer.cancel()


def died_text(
    model_name: str,
    instance_name: str,
    driver: Optional[StubDriver],
    output: List[str],
    cause: Optional[BaseException],
) -> str:
    """Why a request failed when the stub exited or stopped answering in it, with the last
    lines it printed."""
    code: Optional[int] = None
    if driver is not None:
        try:  # the channel closes a moment before the process can be reaped
            code = driver.proc.wait(2)
        except subprocess.TimeoutExpired:
            pass
    what = f"exited with code {code}" if code is not None else f"stopped answering ({cause!r})"
    tail = "\n".join(output[-20:])
    return (
        f"the stub process of model '{model_name}' (instance '{instance_name}') "
        f"{what} while it ran the request; its last output:\n{tail}"
    )


def timed_out_text(model_name: str, instance_name: str, execute_timeout: float) -> str:
    return (
        f"execute of model '{model_name}' (instance '{instance_name}') took "
        f"longer than execute_timeout={execute_timeout:g} s: the stub was killed, "
        "as the backend does with execute-timeout-seconds; start a new StubModel"
    )
