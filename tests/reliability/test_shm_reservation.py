"""What an instance reserves in shared memory: shm-default-byte-size at load, as the
original's one region per stub of that size (spec 5.2; NVIDIA's qa test.sh checks its
regions start at that size). Ours is the backend's first segment, made when the instance has
loaded; the stub makes its segments only as outputs need them, the first of
shm-growth-byte-size staying as its floor.

Found by the operator probe: with shm-default-byte-size=128 MiB a 2-instance model reserved
nothing at load and 512 MiB after one request per instance (a first segment of 128 MiB on
both sides of each instance), where the original reserves 256 MiB. Measured as the distinct
memfd files (tensor segments; the fixed 128 KiB message lanes aside) that the server and its
stubs map or hold open."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
from reliability_support import MODELS, big_infer, memfd_files, start, stubs

MiB = 1 << 20
DEFAULT = 128 * MiB
GROWTH = MiB  # shm-growth-byte-size's default


def _repository(tmp_path: Path) -> Path:
    """big_identity with two instances."""
    repo = tmp_path / "models"
    shutil.copytree(MODELS / "big_identity", repo / "big_identity")
    config = repo / "big_identity" / "config.pbtxt"
    config.write_text(config.read_text().replace("count: 1", "count: 2"))
    return repo


def _tensor_segments(server: Any) -> dict[str, int]:
    pids = [server.pid, *stubs(server, "big_identity").values()]
    assert len(pids) == 3, pids
    return {
        f"{name} #{inode}": size
        for (_, inode), (name, size) in memfd_files(pids).items()
        if "-lane-" not in name
    }


def test_an_instance_reserves_the_default_byte_size_at_load(tmp_path: Path, http: Any) -> None:
    with start(
        ["big_identity"],
        repository=_repository(tmp_path),
        backend_config=[("shm-default-byte-size", str(DEFAULT))],
    ) as server:
        at_load = _tensor_segments(server)
        print(f"memfd bytes at load (2 instances): {sum(at_load.values())} {at_load}")
        assert sorted(at_load.values()) == [DEFAULT, DEFAULT], at_load

        # A request above the inline threshold on each instance: its input lands in the
        # reserved segment, its output in the stub's first segment (shm-growth-byte-size).
        client = http(server)
        served_by = set()
        for _ in range(50):
            out, pid = big_infer(client, np.full(256 * 1024, 5, np.uint8))
            assert out.nbytes == 256 * 1024 and out[-1] == 5
            served_by.add(pid)
            if len(served_by) == 2:
                break
        assert len(served_by) == 2, "both instances should have served a request"
        after = _tensor_segments(server)
        print(f"memfd bytes after a request per instance: {sum(after.values())} {after}")
        assert sorted(after.values()) == [GROWTH, GROWTH, DEFAULT, DEFAULT], after
