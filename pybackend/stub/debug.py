"""Debug mode (PYBACKEND_DEBUG, UV-26): the first instance's stub offers a debugger before
model.py is imported, so breakpoints at import time, in initialize and in execute all work.
The backend lifts its stub and execute timeouts in this mode, so a stub that sits at a
breakpoint is not taken for a hung one, and refuses a model with more than one instance.

    pdb                        breakpoint() opens pdb on the server's terminal (/dev/tty)
    debugpy[:[HOST:]PORT]      debugpy listens (127.0.0.1:5678 by default); attach an IDE
    debugpy-wait[:[HOST:]PORT] the same, and the stub waits for the IDE before the import
"""

from __future__ import annotations

import os
import sys
from types import FrameType
from typing import IO, Any, Callable, Optional, Tuple

from .loader import LoadError

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 5678
USAGE = "use pdb, debugpy[:[HOST:]PORT] or debugpy-wait[:[HOST:]PORT]"


def parse(value: str, where: str) -> Tuple[str, str, int]:
    """``(mode, host, port)`` of a PYBACKEND_DEBUG value (no address for pdb); a value that
    names no debug mode raises LoadError (`pybackend validate` checks configs with it)."""
    mode, _, address = value.partition(":")
    if mode == "pdb" and not address:
        return mode, "", 0
    if mode in ("debugpy", "debugpy-wait"):
        return (mode, *_address(address, value))
    raise LoadError(f"PYBACKEND_DEBUG={value!r} ({where}) is not a debug mode: {USAGE}.")


def start(value: str, model: str, instance: str, log: Callable[[str], None]) -> None:
    """Set up the debugger ``value`` names; a value we cannot honour fails the load."""
    if not value:
        return
    where = f"model '{model}', instance '{instance}'"
    mode, host, port = parse(value, where)
    if mode == "pdb":
        sys.breakpointhook = _tty_pdb(where)
        log(
            f"PYBACKEND_DEBUG=pdb ({where}): breakpoint() in model.py opens pdb on the "
            "server's terminal"
        )
        return
    debugpy = _import_debugpy(value)
    try:
        debugpy.listen((host, port))
    except Exception as e:  # noqa: BLE001 - debugpy raises RuntimeError, OSError, ...
        raise LoadError(
            f"PYBACKEND_DEBUG={value} ({where}): debugpy cannot listen on {host}:{port}: "
            f"{e}. Choose a free port, e.g. PYBACKEND_DEBUG=debugpy:{port + 1}."
        ) from None
    sys.breakpointhook = debugpy.breakpoint
    log(
        f"PYBACKEND_DEBUG={value} ({where}): debugpy listens on {host}:{port}; attach "
        "your IDE (Python: Remote Attach)"
        + (", the model loads once it is attached" if mode == "debugpy-wait" else "")
    )
    if mode == "debugpy-wait":
        debugpy.wait_for_client()


def _address(address: str, value: str) -> Tuple[str, int]:
    if not address:
        return DEFAULT_HOST, DEFAULT_PORT
    host, _, port = address.rpartition(":")
    try:
        number = int(port)
    except ValueError:
        number = -1
    if not 0 < number < 65536:
        raise LoadError(f"PYBACKEND_DEBUG={value!r}: '{port}' is not a port number; {USAGE}.")
    return host or DEFAULT_HOST, number


def _import_debugpy(value: str) -> Any:
    # Without this debugpy warns on every start about frozen stdlib modules (breakpoints
    # in the standard library may be missed; model code is not frozen).
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    try:
        import debugpy  # type: ignore[import-not-found]
    except ImportError:
        raise LoadError(
            f"PYBACKEND_DEBUG={value} needs the debugpy package in the stub's Python "
            f"({sys.executable}): pip install debugpy"
        ) from None
    return debugpy


def _tty_pdb(where: str) -> Callable[..., None]:
    """A breakpoint hook that runs pdb on the controlling terminal: the stub's stdin is not
    the terminal and its stdout goes to the server log."""
    try:
        tty_in: IO[str] = open("/dev/tty")  # noqa: SIM115 - open as long as the stub lives
        tty_out: IO[str] = open("/dev/tty", "w")  # noqa: SIM115
    except OSError as e:
        raise LoadError(
            f"PYBACKEND_DEBUG=pdb ({where}) needs the server's terminal, and there is none "
            f"({e}): run tritonserver in the foreground of a terminal (docker run -it), or "
            "use PYBACKEND_DEBUG=debugpy and attach an IDE."
        ) from None

    def hook(*args: Any, **kwargs: Any) -> None:
        import pdb

        frame: Optional[FrameType] = sys._getframe(1)
        pdb.Pdb(stdin=tty_in, stdout=tty_out).set_trace(frame)

    return hook
