"""Servers of module-scoped fixtures stop on a thread while the next module starts.

Stopping a tritonserver costs 1.5-2 s of waiting and almost no CPU: after SIGTERM it polls
its models once a second until they are unloaded, then joins its metrics thread. A module's
server fixture ends with ``with ... as server: yield server``, and nothing after that looks
at the server, so the suite (run four times by ``make test``) need not sit through each stop.

Only a server entered while a module-scoped fixture is set up, and exited later (in that
fixture's teardown), stops on a thread; one started and stopped inside a test, or inside the
fixture's own setup, stops where it always did. Whatever asks a deferred server anything that
its stop changes (``stop()``, ``log_text()``, ``is_alive()``, ``returncode``,
``killed_stragglers``) waits for the stop first, so it sees what it saw before. The suite's
conftest waits for every stop before the session's leak check runs, and a stop that failed
fails there.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from pybackend.server import TritonServer

_state = threading.local()
_pending: list[DeferredStopServer] = []


def _module_setup_depth() -> int:
    return getattr(_state, "depth", 0)


@contextmanager
def module_fixture_setup() -> Iterator[None]:
    """Around a module-scoped fixture's setup (conftest's pytest_fixture_setup)."""
    _state.depth = _module_setup_depth() + 1
    try:
        yield
    finally:
        _state.depth -= 1


class DeferredStopServer(TritonServer):
    """A TritonServer whose ``__exit__`` at a module fixture's teardown stops it on a thread."""

    _stop_later = False
    _stopping: threading.Thread | None = None
    _stop_error: BaseException | None = None
    _returncode: int | None = None
    _stragglers: set[int] = set()  # noqa: RUF012 - replaced per instance, never mutated

    def __enter__(self) -> TritonServer:
        self._stop_later = _module_setup_depth() > 0
        return super().__enter__()

    def __exit__(self, *exc_info: object) -> None:
        if not self._stop_later or _module_setup_depth() > 0 or self._stopping is not None:
            self.stop()
            return
        self._stopping = threading.Thread(
            target=self._stop_in_background, name=f"stop {self.model_repository}", daemon=True
        )
        _pending.append(self)
        self._stopping.start()

    def _stop_in_background(self) -> None:
        try:
            TritonServer.stop(self)
        except BaseException as e:  # noqa: BLE001 - handed to whoever waits for the stop
            self._stop_error = e

    def wait_stopped(self) -> None:
        """Wait for a deferred stop; raise what it raised."""
        thread = self._stopping
        if thread is None or thread is threading.current_thread():
            return
        thread.join()
        error, self._stop_error = self._stop_error, None
        if error is not None:
            raise error

    def stop(self) -> int | None:
        self.wait_stopped()
        return super().stop()

    def log_text(self) -> str:
        self.wait_stopped()
        return super().log_text()

    def is_alive(self) -> bool:
        self.wait_stopped()
        return super().is_alive()

    # TritonServer sets these in __init__ and stop(): properties, so a read waits for the stop.
    @property  # type: ignore[override]
    def returncode(self) -> int | None:
        self.wait_stopped()
        return self._returncode

    @returncode.setter
    def returncode(self, value: int | None) -> None:
        self._returncode = value

    @property  # type: ignore[override]
    def killed_stragglers(self) -> set[int]:
        self.wait_stopped()
        return self._stragglers

    @killed_stragglers.setter
    def killed_stragglers(self, value: set[int]) -> None:
        self._stragglers = value


def wait_for_deferred_stops() -> None:
    """Wait for every deferred stop so far; raise the first failure after waiting for all."""
    errors = []
    while _pending:
        server = _pending.pop(0)
        try:
            server.wait_stopped()
        except BaseException as e:  # noqa: BLE001 - reported once all have stopped
            errors.append(e)
    if errors:
        raise errors[0]
