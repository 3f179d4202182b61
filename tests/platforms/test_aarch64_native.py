"""The native unit tests (csrc/tests), cross-compiled for aarch64 by the kit with warnings as
errors, run under qemu-user: the codec, arena, channel, cgroup reader, memory ledger, BLS
cycle rule, backend config and CPU hop on a weakly ordered 64-bit ARM target."""

from __future__ import annotations

import re
import subprocess

import pytest
from aarch64_support import BACKENDS, SITE, emulated, kit

from integration_support import REPO_ROOT

#: Every native unit test CMakeLists.txt declares (pybackend_unit_test), the ones ctest runs.
UNIT_TESTS = re.findall(
    r"^\s*pybackend_unit_test\((\w+)$", (REPO_ROOT / "CMakeLists.txt").read_text(), re.M
)


def test_every_unit_test_is_found() -> None:
    assert {"ipc_test", "ledger_test", "bls_cycles_test"} <= set(UNIT_TESTS), UNIT_TESTS


@pytest.mark.parametrize("target", UNIT_TESTS)
def test_native_units_on_aarch64(target: str) -> None:
    program = kit() / "build" / target
    run = subprocess.run(emulated(program), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"{target}: all passed" in run.stdout


def test_the_wheel_is_manylinux_aarch64_with_aarch64_libraries() -> None:
    """The kit's wheel (scripts/build_wheel.sh with PYBACKEND_CROSS=aarch64): auditwheel's
    tag, and the backend and the stub's native helper it installed are aarch64 ELF files."""
    (wheel,) = (kit() / "dist").glob("pybackend-*.whl")
    assert wheel.name.endswith("-py3-none-manylinux_2_35_aarch64.whl"), wheel.name
    for library in (
        BACKENDS / "python" / "libtriton_python.so",
        SITE / "pybackend" / "utils" / "libpybackend_native.so",
    ):
        header = library.read_bytes()[:20]
        assert header[:4] == b"\x7fELF"
        assert int.from_bytes(header[18:20], "little") == 183, library  # EM_AARCH64
