"""UV-09 for BLS: a long run of the BLS pipeline example (three BLS calls per request) keeps
the calling stub's RSS and shared memory flat. Opt-in (-m soak); PYBACKEND_SOAK_REQUESTS
sets the length (default 100,000 requests)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from pybackend.server import TritonServer
from pybackend.server.processes import with_arguments

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
MODELS = ("add_sub", "bls_preprocess", "bls_postprocess", "bls_pipeline")
MiB = 1 << 20


def stub_pid(instance: str) -> int:
    for pid in with_arguments(b"pybackend.stub", instance.encode(), exact=True):
        return pid
    raise AssertionError(f"no stub process for {instance}")


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def shared_mapped(pid: int) -> int:
    total = 0
    for line in Path(f"/proc/{pid}/maps").read_text().splitlines():
        if "memfd:" in line:
            start, end = line.split()[0].split("-")
            total += int(end, 16) - int(start, 16)
    return total


def drive(server: TritonServer, requests: int, threads: int = 4) -> None:
    import tritonclient.grpc as grpcclient

    errors: list = []

    def work(n: int) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            text = grpcclient.InferInput("TEXT", [1], "BYTES")
            text.set_data_from_numpy(np.array([b"soak 123"], np.object_))
            weights = grpcclient.InferInput("WEIGHTS", [4], "FP32")
            weights.set_data_from_numpy(np.zeros(4, np.float32))
            for _ in range(n):
                out = client.infer("bls_pipeline", [text, weights]).as_numpy("LABEL")
                assert out[0] == b"letters"
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)
        finally:
            client.close()

    ts = [threading.Thread(target=work, args=(requests // threads,)) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors[:3]


@pytest.mark.soak
def test_bls_pipeline_soak_keeps_memory_flat() -> None:
    total = int(os.environ.get("PYBACKEND_SOAK_REQUESTS", "100000"))
    with TritonServer(REPO, model_control_mode="explicit", load_models=MODELS) as server:
        drive(server, 2000)  # warm-up: caches, arenas and allocator pools settle
        pid = stub_pid("bls_pipeline_0_0")
        rss0, shm0 = rss(pid), shared_mapped(pid)
        drive(server, total)
        rss1, shm1 = rss(pid), shared_mapped(pid)
    assert rss1 - rss0 < 16 * MiB, (rss0, rss1)
    assert shm1 - shm0 < 8 * MiB, (shm0, shm1)
