"""A segment larger than the memory left is refused before it is reserved.

On a memfd a fallocate beyond the free memory does not fail: the kernel's OOM killer kills
processes to make room (found by probing with shm-default-byte-size=100 GiB on a 24 GiB
machine: the first 48 MB request OOM-killed the server and its client). Both sides now refuse
such a segment with the figures and the knobs, and the instance keeps serving.

The server runs with PYBACKEND_CGROUP_ROOT (the test hook of csrc/backend/cores.cc) naming a
fake tree whose /proc/meminfo says 32 MiB are available, so a 48 MiB tensor meets the rule
without using the memory (without the rule it would simply be served)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_support import big_infer, start, stubs
from tritonclient.utils import InferenceServerException

MiB = 1 << 20
AVAILABLE = 32 * MiB
REFUSED = (
    "bytes of shared memory for tensors: the machine has 33554432 bytes of memory available "
    "(MemAvailable), so reserving it would make the kernel kill processes (OOM)"
)


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("fake_root")
    (root / "proc").mkdir()
    (root / "proc" / "meminfo").write_text(
        f"MemTotal: 67108864 kB\nMemFree: 1024 kB\nMemAvailable: {AVAILABLE // 1024} kB\n"
    )
    return root


@pytest.fixture(scope="module")
def server(fake_root: Path) -> Iterator[Any]:
    with start(["big_identity"], env={"PYBACKEND_CGROUP_ROOT": str(fake_root)}) as s:
        yield s


def test_an_input_larger_than_the_memory_left_is_refused(server: Any, http: Any) -> None:
    client = http(server)
    (pid,) = stubs(server, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(48 * MiB, np.uint8))
    message = str(info.value)
    assert "Failed to increase the shared memory pool size to" in message
    assert "big_identity_0_0" in message and REFUSED in message
    assert "lower shm-default-byte-size or shm-growth-byte-size" in message
    out, served_by = big_infer(client, np.full(2 * MiB, 7, np.uint8))
    assert out.nbytes == 2 * MiB and out[-1] == 7 and served_by == pid


def test_an_output_larger_than_the_memory_left_is_refused(server: Any, http: Any) -> None:
    client = http(server)
    (pid,) = stubs(server, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(16, np.uint8), grow=48 * MiB)
    message = str(info.value)
    assert "Failed to increase the shared memory pool size to" in message and REFUSED in message
    assert "or return smaller tensors" in message
    _, served_by = big_infer(client, np.ones(16, np.uint8), grow=2 * MiB)
    assert served_by == pid
    assert server.is_alive()


def test_a_reservation_refused_at_load_is_a_warning(fake_root: Path, http: Any) -> None:
    """The instance reserves shm-default-byte-size at load; where the memory left refuses
    it, the load goes on (as the original's sparse region does) with a warning, and the
    requests that need it fail with the figures."""
    with start(
        ["big_identity"],
        env={"PYBACKEND_CGROUP_ROOT": str(fake_root)},
        backend_config=[("shm-default-byte-size", str(48 * MiB))],
    ) as server:
        log = server.log_text()
        assert "could not reserve shm-default-byte-size (50331648 bytes) of shared memory" in log
        assert REFUSED in log
        client = http(server)
        with pytest.raises(InferenceServerException) as info:
            big_infer(client, np.ones(2 * MiB, np.uint8))
        assert REFUSED in str(info.value)
        out, _ = big_infer(client, np.ones(16, np.uint8))  # inline: no shared memory
        assert out.nbytes == 16


def test_a_cgroup_limit_below_the_free_memory_bounds_it(tmp_path: Path, monkeypatch: Any) -> None:
    from pybackend.ipc.arena import ArenaError, create_segment_fd
    from pybackend.ipc.headroom import memory_headroom

    (tmp_path / "proc" / "self").mkdir(parents=True)
    (tmp_path / "proc" / "meminfo").write_text("MemAvailable: 1048576 kB\n")
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/pod/ctr\n")
    (tmp_path / "sys" / "fs" / "cgroup" / "pod" / "ctr").mkdir(parents=True)
    (tmp_path / "sys" / "fs" / "cgroup" / "pod" / "ctr" / "memory.max").write_text("16777216\n")
    monkeypatch.setenv("PYBACKEND_CGROUP_ROOT", str(tmp_path))
    assert memory_headroom() == (
        16 * MiB,
        "the memory limit of the container (cgroup) is 16777216 bytes",
    )
    with pytest.raises(ArenaError, match="the memory limit of the container"):
        create_segment_fd(32 * MiB)
    # v1: the memory controller's line; "max" or a missing file is no limit.
    (tmp_path / "proc" / "self" / "cgroup").write_text("4:memory:/docker/abc\n")
    (tmp_path / "sys" / "fs" / "cgroup" / "memory").mkdir()
    (tmp_path / "sys" / "fs" / "cgroup" / "memory" / "memory.limit_in_bytes").write_text(
        "33554432\n"
    )
    assert memory_headroom()[0] == 32 * MiB
    (tmp_path / "proc" / "self" / "cgroup").write_text("0::/\n")
    (tmp_path / "sys" / "fs" / "cgroup" / "memory.max").write_text("max\n")
    assert memory_headroom()[0] == 1 << 30
