"""``python -m pybackend.stub --instance NAME``: started by the backend with the sync and
async channels on fds 3 and 4 (docs/protocol.md, "Start")."""

from __future__ import annotations

import faulthandler
import os
import sys

from . import stop_signals


def _close_inherited_fds(keep_up_to: int) -> None:
    """Close every inherited fd above the channels, so the stub holds nothing of the
    server's (listening sockets, other stubs' channels)."""
    try:
        fds = [int(n) for n in os.listdir("/proc/self/fd")]
    except OSError:
        os.closerange(keep_up_to + 1, 65536)
        return
    for fd in fds:
        if fd > keep_up_to:
            try:
                os.close(fd)
            except OSError:
                pass


def _check_interpreter() -> None:
    """The stub runs in whatever interpreter EXECUTION_ENV_PATH names: say what is missing
    and how to fix it instead of leaving a ModuleNotFoundError traceback (UV-20). Any
    CPython 3.9+ with numpy works (the stub is pure Python; no ABI to match)."""
    where = f"{sys.executable} (Python {sys.version.split()[0]}, environment {sys.prefix})"
    if sys.version_info < (3, 9):
        _fail(
            f"the stub's interpreter {where} is too old: pybackend needs Python 3.9 or later. "
            "Point EXECUTION_ENV_PATH at an environment with Python 3.9 or later."
        )
    try:
        import numpy  # noqa: F401
    except ImportError as e:
        _fail(
            f"the stub's interpreter {where} cannot import numpy ({e}). Install numpy into "
            f"that environment ({sys.executable} -m pip install numpy) or point "
            "EXECUTION_ENV_PATH at one that has it."
        )


def _own_packages_first() -> None:
    """The backend puts the directory that holds pybackend first on PYTHONPATH. For a wheel
    install that is the server environment's whole site-packages, whose numpy would shadow
    the interpreter's own in a stub started with another interpreter (python-executable,
    PYBACKEND_PYTHON: NumPy-1 model code run under NumPy 1, README). So when that directory
    holds a numpy and is not this interpreter's own site-packages, it moves after them:
    pybackend is already imported from it, and what only it has (pb_utils, numpy for an
    interpreter without one) is still found there."""
    import site

    # <parent>/pybackend/stub/__main__.py, taken apart before links are resolved (pybackend
    # itself may be a link into a source checkout).
    parent = os.path.realpath(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    if not os.path.isdir(os.path.join(parent, "numpy")):
        return
    own = site.getsitepackages() + [site.getusersitepackages()]
    if parent in {os.path.realpath(p) for p in own}:
        return
    moved = [p for p in sys.path if p and os.path.realpath(p) == parent]
    for p in moved:
        sys.path.remove(p)
    sys.path.extend(moved)


def hide_own_arguments() -> None:
    """The original's stub is an embedded interpreter whose ``sys.argv`` is ``['']``: model
    code (or a library it loads: argparse's ``parse_args()``, absl flags, HfArgumentParser)
    that parses the command line at import or in initialize finds nothing there. Ours would
    find ``--instance NAME`` and refuse it (an argparse SystemExit fails the load)."""
    sys.argv[:] = [""]


def working_directory_as_original() -> None:
    """The original's embedded interpreter has ``''`` first on ``sys.path``: the working
    directory as it is at each import. ``python -m`` puts that directory's path there instead,
    so a model that changes directory and then imports a module that lies there (as code
    written for a repository checkout does) would not find it."""
    if sys.path and sys.path[0]:
        try:
            here = os.path.realpath(os.getcwd())
        except OSError:  # the working directory was removed
            return
        if os.path.realpath(sys.path[0]) == here:
            sys.path[0] = ""


def _versions() -> str:
    """For UV-22's question "which stub will my environment get?": one line with what
    matters for compatibility."""
    import platform

    import numpy

    from .. import __version__
    from ..ipc.protocol import PROTOCOL_VERSION

    return (
        f"pybackend {__version__} stub, protocol {PROTOCOL_VERSION}: "
        f"{platform.python_implementation()} {platform.python_version()} ({sys.executable}), "
        f"numpy {numpy.__version__}"
    )


def _fail(message: str) -> None:
    print(f"pybackend: {message}", file=sys.stderr)
    sys.exit(2)


def main(argv: list) -> None:
    # SIGTERM and SIGINT are ignored, as by the original's stub: tritonserver stops us.
    stop_signals.ignore()
    # A crash in native code (SIGSEGV, SIGBUS, SIGFPE, SIGABRT) prints the Python stack of
    # the crashing thread to stderr, whose last lines the backend puts into the error of
    # every request the stub held. Only that thread: the tail it keeps is 20 lines.
    faulthandler.enable(file=sys.stderr, all_threads=False)
    sync_fd = int(os.environ.get("PYBACKEND_SYNC_FD", "3"))
    async_fd = int(os.environ.get("PYBACKEND_ASYNC_FD", "4"))
    _close_inherited_fds(max(sync_fd, async_fd, 4))

    import argparse

    parser = argparse.ArgumentParser(prog="python -m pybackend.stub")
    parser.add_argument("--instance", default=os.environ.get("PYBACKEND_INSTANCE", "stub"))
    parser.add_argument(
        "--version",
        action="store_true",
        help="print the versions this interpreter would run the stub with, and exit",
    )
    args = parser.parse_args(argv)
    hide_own_arguments()
    working_directory_as_original()

    _own_packages_first()
    _check_interpreter()
    if args.version:
        print(_versions())
        return
    from .main import run

    run(sync_fd, async_fd, args.instance)


if __name__ == "__main__":
    main(sys.argv[1:])
