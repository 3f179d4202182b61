"""The aarch64 kit (scripts/aarch64_kit.sh) and a tritonserver run from it: the aarch64
tritonserver 2.51 of NVIDIA's aarch64 wheel under qemu-user, loading libtriton_python.so from
our aarch64 wheel, whose stubs run Debian's aarch64 CPython 3.11 under qemu-user too."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from integration_support import REPO_ROOT
from pybackend.server import TritonServer

KIT = Path(os.environ.get("PYBACKEND_AARCH64_KIT", REPO_ROOT / ".aarch64-kit")).resolve()
SYSROOT = KIT / "sysroot"
TRITONSERVER = KIT / "pytriton" / "pytriton" / "tritonserver" / "bin" / "tritonserver"
#: Our aarch64 wheel, unpacked for the aarch64 interpreter, and its backends directory.
SITE = KIT / "site"
BACKENDS = SITE / "pybackend" / "backends"
#: Every library directory the emulated programs load from (the wheel's, then Debian's).
GUEST_LIBRARY_PATH = ":".join(
    str(p)
    for p in (
        KIT / "pytriton" / "nvidia_pytriton.libs",
        SYSROOT / "lib" / "aarch64-linux-gnu",
        SYSROOT / "usr" / "lib" / "aarch64-linux-gnu",
    )
)


def kit() -> Path:
    """The kit's folder. Missing: a failure where the run asked for these tests
    (PYBACKEND_TEST_AARCH64=1, as `make test` does), else a skip saying how to run them."""
    needed = (
        TRITONSERVER,
        KIT / "python3",
        KIT / "build",
        BACKENDS / "python" / "libtriton_python.so",
    )
    missing = [p for p in needed if not p.exists()]
    if shutil.which("qemu-aarch64") is None:
        missing.append(Path("qemu-aarch64"))
    if missing:
        why = (
            f"the aarch64 kit is not complete (missing {', '.join(map(str, missing))}): "
            "`make aarch64-kit` builds it (qemu-user and g++-aarch64-linux-gnu needed)"
        )
        if os.environ.get("PYBACKEND_TEST_AARCH64") == "1":
            pytest.fail(why)
        pytest.skip(why)
    return KIT


def emulated(program: Path, *args: str) -> list[str]:
    """The command that runs an aarch64 ``program`` of the kit under qemu-user."""
    qemu = shutil.which("qemu-aarch64") or "qemu-aarch64"
    return [
        qemu,
        "-L",
        str(SYSROOT),
        "-E",
        f"LD_LIBRARY_PATH={GUEST_LIBRARY_PATH}",
        str(program),
        *args,
    ]


class EmulatedTritonServer(TritonServer):
    """A TritonServer whose tritonserver is the kit's aarch64 one, with the kit's backend.
    Emulation makes every start slow (a stub's interpreter and numpy take seconds of CPU to
    load, and a server's models load side by side, an auto-complete stub and an instance's
    each), hence the long bounds: the stubs' HELLO, readiness and stop."""

    def __init__(self, model_repository: Path) -> None:
        kit()
        super().__init__(
            model_repository,
            backend=BACKENDS,
            ready_timeout=600.0,
            stop_timeout=60.0,
            backend_config=[("stub-timeout-seconds", "300")],
        )

    def _program(self) -> list[str]:
        return emulated(TRITONSERVER)
