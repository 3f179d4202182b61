"""UV-01/UV-02: 8 models × 2 instances serve tensors far larger than Docker's default
64 MB /dev/shm, with the server in a private mount namespace whose /dev/shm is a 64 MB
tmpfs (as `docker run` gives). Nothing of ours ever appears in /dev/shm: tensors live in
memfd segments. The CI run uses 80 MB tensors; `-m slow` runs the full 256 MB."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from reliability_support import MODELS, stubs

from integration_support.leaks import ORIGINAL_SHM_LEAK, dev_shm_in_use, shm_files
from pybackend.server import TritonServer

MiB = 1 << 20
SHM_SIZE = "64m"
MODELS_N = 8


def _namespaces_work() -> bool:
    if shutil.which("unshare") is None:
        return False
    probe = f"mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm && test -w /dev/shm"
    try:
        done = subprocess.run(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", probe],
            capture_output=True,
            timeout=10,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


class SmallShmServer(TritonServer):
    """tritonserver in its own mount namespace with a 64 MB tmpfs on /dev/shm (the same pid:
    unshare and sh exec into tritonserver)."""

    def _build_command(self, ld_library_path: str) -> list[str]:
        inner = super()._build_command(ld_library_path)
        script = f'mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm && exec "$@"'
        return ["unshare", "-m", "--propagation", "private", "sh", "-c", script, "sh", *inner]


def _repository(root: Path) -> Path:
    src = MODELS / "big_identity"
    config = (src / "config.pbtxt").read_text().replace("count: 1", "count: 2")
    for i in range(MODELS_N):
        dst = root / f"big_{i}"
        (dst / "1").mkdir(parents=True)
        (dst / "config.pbtxt").write_text(config)
        shutil.copy(src / "1" / "model.py", dst / "1" / "model.py")
    return root


def _serve_all(tmp_path: Path, http: Any, tensor_bytes: int) -> None:
    if not _namespaces_work():
        pytest.skip("no private mount namespace here (unshare -m needs CAP_SYS_ADMIN)")
    before = shm_files()
    with SmallShmServer(_repository(tmp_path / "models"), ready_timeout=120) as server:
        ns_shm = Path(f"/proc/{server.pid}/root/dev/shm")
        assert os.statvfs(ns_shm).f_blocks * os.statvfs(ns_shm).f_frsize == 64 * MiB
        assert len(stubs(server)) == 2 * MODELS_N
        client = http(server, concurrency=2, network_timeout=300.0)
        data = np.arange(tensor_bytes, dtype=np.uint8)
        for i in range(MODELS_N):
            # Two at once, so both instances of the model take one.
            inputs, outputs = _request(data)
            pending = [client.async_infer(f"big_{i}", inputs, outputs=outputs) for _ in range(2)]
            pids = set()
            for p in pending:
                result = p.get_result()
                out = result.as_numpy("OUT")
                assert (
                    out.nbytes == tensor_bytes and out[-1] == data[-1] and out[12345] == data[12345]
                )
                pids.add(int(result.as_numpy("PID")[0]))
            assert pids <= set(stubs(server, f"big_{i}").values())
        # Nothing of ours in the 64 MB /dev/shm, in use or left over.
        assert not list(ns_shm.iterdir())
        st = os.statvfs(ns_shm)
        assert st.f_bfree == st.f_blocks
        assert not dev_shm_in_use({server.pid} | set(stubs(server).values()))
        client.close()
    assert not {n for n in shm_files() - before if not ORIGINAL_SHM_LEAK.match(n)}


def _request(data: np.ndarray) -> tuple[list[Any], list[Any]]:
    import tritonclient.http as httpclient

    inp = httpclient.InferInput("IN", list(data.shape), "UINT8")
    inp.set_data_from_numpy(data, binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=True) for n in ("OUT", "PID")]
    return [inp], outputs


def test_8_models_2_instances_with_80mb_tensors_in_64mb_dev_shm(tmp_path: Path, http: Any) -> None:
    _serve_all(tmp_path, http, 80 * MiB)


@pytest.mark.soak
def test_8_models_2_instances_with_256mb_tensors_in_64mb_dev_shm(tmp_path: Path, http: Any) -> None:
    _serve_all(tmp_path, http, 256 * MiB)
