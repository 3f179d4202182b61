"""Our backend keeps tensors in memfd segments: nothing may appear in /dev/shm while it serves.

Against the original backend the same probe must see its /dev/shm regions, which shows
that the probe itself works.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from integration_support import EXAMPLES_REPOSITORY
from integration_support.clients import InferClient
from integration_support.leaks import ORIGINAL_SHM_LEAK, shm_files
from pybackend.server import TritonServer
from pybackend.server.processes import descendants


def _dev_shm_mappings(pids: set[int]) -> set[str]:
    """Paths under /dev/shm that any of pids has mapped."""
    mapped = set()
    for pid in pids:
        try:
            maps = Path(f"/proc/{pid}/maps").read_text()
        except OSError:
            continue
        mapped |= {line.split(None, 5)[-1] for line in maps.splitlines() if "/dev/shm/" in line}
    return mapped


def _exercise(server: TritonServer) -> None:
    client = InferClient("http", httpclient, httpclient.InferenceServerClient(server.http_url))
    try:
        values = np.arange(4, dtype=np.float32)
        out = client.infer("add_sub", {"INPUT0": values, "INPUT1": values}, ["OUTPUT0"])
        np.testing.assert_array_equal(out["OUTPUT0"], values * 2)
        # 16 MiB in one element: more than any default region, so memory has to grow.
        big = np.array([[b"\x01" * (16 << 20)]], dtype=np.object_)
        out = client.infer("string_echo", {"INPUT0": big}, ["OUTPUT0"])
        assert out["OUTPUT0"][0, 0] == big[0, 0]
        rows = np.ones((8, 4), dtype=np.float32)
        out = client.infer("batched_scale", {"INPUT0": rows}, ["OUTPUT0"])
        np.testing.assert_array_equal(out["OUTPUT0"], rows * 2)
    finally:
        client.client.close()


def test_nothing_in_dev_shm_while_serving(backend_kind: str) -> None:
    before = shm_files()
    with TritonServer(EXAMPLES_REPOSITORY, backend=backend_kind) as server:
        _exercise(server)
        appeared = shm_files() - before
        mapped = _dev_shm_mappings(descendants(server.pid) | {server.pid})
    if backend_kind == "original":
        assert any(ORIGINAL_SHM_LEAK.match(name) for name in appeared), appeared
        return
    assert not appeared, f"files appeared in /dev/shm while our backend served: {appeared}"
    assert not mapped, f"the server or its stubs map files from /dev/shm: {mapped}"
