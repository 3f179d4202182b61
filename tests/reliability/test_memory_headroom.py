"""A segment larger than the memory left is refused before it is reserved.

On a memfd a fallocate beyond the free memory does not fail: the kernel's OOM killer kills
processes to make room (found by probing with shm-default-byte-size=100 GiB on a 24 GiB
machine: the first 48 MB request OOM-killed the server and its client). Both sides now refuse
such a segment with the figures and the knobs, and the instance keeps serving.

The server runs with PYBACKEND_CGROUP_ROOT (the test hook of the cgroup reader,
csrc/ipc/cgroup.h) naming a fake tree (integration_support/fake_cgroup.py) whose /proc/meminfo
says 32 MiB are available, so a 48 MiB tensor meets the rule without using the memory (without
the rule it would simply be served). The memory limit is the smallest over our cgroup and its
ancestors: a limit only on a parent (a Kubernetes pod above the container, a systemd slice)
bounds it too."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_support import big_infer, start, stubs
from tritonclient.utils import InferenceServerException

from integration_support.fake_cgroup import fake_cgroup_root

MiB = 1 << 20
AVAILABLE = 32 * MiB
LIMIT = 16 * MiB  # below AVAILABLE, so the cgroup is the figure named
REFUSED = (
    "bytes of shared memory for tensors: the machine has 33554432 bytes of memory available "
    "(MemAvailable), so reserving it would make the kernel kill processes (OOM)"
)


@pytest.fixture(scope="module")
def fake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The server's "/": 32 MiB available, in a cgroup namespace ("0::/") without a limit."""
    return fake_cgroup_root(tmp_path_factory.mktemp("fake_root"), "0::/", {}, AVAILABLE)


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


# A limit only on the parent of the server's cgroup: v2, the pod above the (unlimited)
# container; v1, the systemd slice above the service.
PARENT_ONLY = {
    "v2": ("0::/kubepods/pod1/ctr", "kubepods/pod1/memory.max", "kubepods/pod1/ctr/memory.max"),
    "v1": (
        "4:memory:/system.slice/app.service",
        "memory/system.slice/memory.limit_in_bytes",
        "memory/system.slice/app.service/memory.limit_in_bytes",
    ),
}


@pytest.fixture(params=sorted(PARENT_ONLY))
def ancestor_limit(fake_root: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """For one test, a 16 MiB memory limit only on the parent cgroup of the server (the files
    are read at every new segment); yields the figure the refusal names."""
    cgroup, parent, own = PARENT_ONLY[request.param]
    unlimited = "max" if request.param == "v2" else "9223372036854771712"
    fake_cgroup_root(fake_root, cgroup, {parent: str(LIMIT), own: unlimited})
    try:
        yield f"the memory limit of the container (cgroup) is {LIMIT} bytes"
    finally:
        (fake_root / "proc" / "self" / "cgroup").write_text("0::/\n")


def test_a_limit_only_on_a_parent_cgroup_refuses_an_input(
    server: Any, http: Any, ancestor_limit: str
) -> None:
    client = http(server)
    (pid,) = stubs(server, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(24 * MiB, np.uint8))
    message = str(info.value)
    assert "Failed to increase the shared memory pool size to" in message
    assert f"bytes of shared memory for tensors: {ancestor_limit}, so reserving it" in message
    assert "or send smaller tensors" in message  # the backend's check, not the stub's
    out, served_by = big_infer(client, np.full(2 * MiB, 7, np.uint8))
    assert out.nbytes == 2 * MiB and out[-1] == 7 and served_by == pid


def test_a_limit_only_on_a_parent_cgroup_refuses_an_output(
    server: Any, http: Any, ancestor_limit: str
) -> None:
    client = http(server)
    (pid,) = stubs(server, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(16, np.uint8), grow=24 * MiB)
    message = str(info.value)
    assert f"bytes of shared memory for tensors: {ancestor_limit}, so reserving it" in message
    assert "or return smaller tensors" in message
    _, served_by = big_infer(client, np.ones(16, np.uint8), grow=2 * MiB)
    assert served_by == pid
    assert server.is_alive()


GIB_AVAILABLE = 1 << 30


@pytest.mark.parametrize(
    ("cgroup", "files", "headroom"),
    [
        # v2: our own cgroup's limit; "max" or no file is no limit.
        ("0::/pod/ctr", {"pod/ctr/memory.max": "16777216"}, 16 * MiB),
        ("0::/", {"memory.max": "max"}, GIB_AVAILABLE),
        # v2: only the pod (the parent) or the grandparent sets a limit; the smallest wins.
        ("0::/pod/ctr", {"pod/memory.max": "25165824", "pod/ctr/memory.max": "max"}, 24 * MiB),
        (
            "0::/kubepods/pod/ctr",
            {
                "kubepods/memory.max": "8388608",
                "kubepods/pod/memory.max": "33554432",
                "kubepods/pod/ctr/memory.max": "max",
            },
            8 * MiB,
        ),
        # The path not there under the mount (the container's cgroup mounted there): the mount.
        ("0::/elsewhere/ctr", {"memory.max": "16777216"}, 16 * MiB),
        # v1: the memory controller's line; Docker's container cgroup mounted at the mount
        # point, or the limit only on the parent (a systemd slice).
        ("4:memory:/docker/abc", {"memory/memory.limit_in_bytes": "33554432"}, 32 * MiB),
        (
            "4:memory:/system.slice/app.service\n3:cpu,cpuacct:/system.slice/app.service",
            {
                "memory/system.slice/memory.limit_in_bytes": "25165824",
                "memory/system.slice/app.service/memory.limit_in_bytes": "9223372036854771712",
            },
            24 * MiB,
        ),
    ],
    ids=["v2-own", "v2-none", "v2-parent", "v2-grandpa", "v2-mounted", "v1-docker", "v1-parent"],
)
def test_the_smallest_cgroup_limit_bounds_it(
    tmp_path: Path, monkeypatch: Any, cgroup: str, files: dict[str, str], headroom: int
) -> None:
    from pybackend.ipc.headroom import memory_headroom

    monkeypatch.setenv(
        "PYBACKEND_CGROUP_ROOT", str(fake_cgroup_root(tmp_path, cgroup, files, GIB_AVAILABLE))
    )
    assert memory_headroom()[0] == headroom


def test_a_cgroup_limit_below_the_free_memory_is_named(tmp_path: Path, monkeypatch: Any) -> None:
    from pybackend.ipc.arena import ArenaError, create_segment_fd
    from pybackend.ipc.headroom import memory_headroom

    files = {"pod/memory.max": "16777216", "pod/ctr/memory.max": "max"}
    root = fake_cgroup_root(tmp_path, "0::/pod/ctr", files, GIB_AVAILABLE)
    monkeypatch.setenv("PYBACKEND_CGROUP_ROOT", str(root))
    assert memory_headroom() == (
        16 * MiB,
        "the memory limit of the container (cgroup) is 16777216 bytes",
    )
    with pytest.raises(ArenaError, match="the memory limit of the container"):
        create_segment_fd(32 * MiB)
