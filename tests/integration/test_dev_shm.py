"""Our backend keeps tensors in memfd segments: nothing may appear in /dev/shm while it serves.

Two probes: what the server and its stubs have mapped or open under /dev/shm (exact, even
with other servers running on the machine), and which files appeared there meanwhile.
Against the original backend the first probe must see its regions, which shows that the
probe itself works.
"""

from __future__ import annotations

import numpy as np
import tritonclient.http as httpclient

from integration_support import EXAMPLES_REPOSITORY
from integration_support.clients import InferClient
from integration_support.leaks import ORIGINAL_SHM_LEAK, dev_shm_in_use, shm_files
from pybackend.server import TritonServer
from pybackend.server.processes import descendants


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
        in_use = dev_shm_in_use(descendants(server.pid) | {server.pid})
        # Files of the original backend may come from other servers on this machine.
        appeared = {n for n in shm_files() - before if not ORIGINAL_SHM_LEAK.match(n)}
    if backend_kind == "original":
        assert any("triton_python_backend_shm_region_" in path for path in in_use), in_use
        return
    assert not in_use, f"the server or its stubs use files in /dev/shm: {in_use}"
    assert not appeared, f"files appeared in /dev/shm while our backend served: {appeared}"
