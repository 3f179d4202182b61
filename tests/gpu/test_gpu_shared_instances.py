"""Two KIND_GPU instances in one process (PYBACKEND_INSTANCE_PROCESS=shared, issue 29): both
instance threads have the same CUDA context current (the device's primary context, so one
context for the model instead of one per instance), and the model's processes use less
device memory than the same model under `own`, by about one context.

Needs an NVIDIA GPU (skipped by conftest.py elsewhere); device memory is read per process
with nvidia-smi, so the figures are the driver's own."""

from __future__ import annotations

import json
import shutil
import subprocess
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from gpu_support import serve

from pybackend.server import TritonServer
from pybackend.server.processes import descendants

pytestmark = pytest.mark.gpu

MODEL_PY = textwrap.dedent(
    """
    import ctypes
    import json
    import os
    import threading

    import numpy as np
    import torch
    import triton_python_backend_utils as pb_utils

    _cuda = ctypes.CDLL("libcuda.so.1")


    def _current_context():
        ctx = ctypes.c_void_p()
        rc = _cuda.cuCtxGetCurrent(ctypes.byref(ctx))
        return rc, ctx.value or 0


    class TritonPythonModel:
        def initialize(self, args):
            self.args = dict(args)
            self.device = int(args["model_instance_device_id"])
            # A tensor on this instance's device: the context is really in use.
            self.weights = torch.ones(1024, 1024, device=f"cuda:{self.device}")

        def execute(self, requests):
            rc, ctx = _current_context()
            answer = {
                "instance": self.args["model_instance_name"],
                "pid": os.getpid(),
                "thread": threading.get_ident(),
                "rc": rc,
                "context": ctx,
                "torch_device": torch.cuda.current_device(),
                "sum": float(self.weights.sum().item()),
            }
            out = np.array([json.dumps(answer)], dtype=np.object_)
            return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
    """
)


def config(mode: str) -> str:
    return json.dumps(
        {
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "OP", "data_type": "TYPE_INT32", "dims": [1]}],
            "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
            "instance_group": [{"count": 2, "kind": "KIND_GPU", "gpus": [0]}],
            "parameters": {"PYBACKEND_INSTANCE_PROCESS": {"string_value": mode}},
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("gpu_shared")
    (repo / "gpu_ident" / "1").mkdir(parents=True)
    (repo / "gpu_ident" / "1" / "model.py").write_text(MODEL_PY)
    with serve(repo) as s:
        yield s


def device_memory_mib(pids: set[int]) -> int:
    """Device memory the driver charges to these processes (nvidia-smi)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    used = 0
    for line in out.splitlines():
        pid, mib = (part.strip() for part in line.split(","))
        if int(pid) in pids:
            used += int(mib)
    return used


def answers(server: TritonServer, n: int) -> list[dict[str, Any]]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        found: dict[str, dict[str, Any]] = {}
        for _ in range(n):
            inp = grpcclient.InferInput("OP", [1], "INT32")
            inp.set_data_from_numpy(np.array([0], np.int32))
            result = client.infer("gpu_ident", [inp])
            a = json.loads(result.as_numpy("OUT")[0])
            found[a["instance"]] = a
        return list(found.values())
    finally:
        client.close()


def load(server: TritonServer, mode: str) -> tuple[list[dict[str, Any]], int]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        client.load_model("gpu_ident", config=config(mode))
        # Two instances take turns: enough calls reach both.
        seen = answers(server, 32)
        stubs = {
            p
            for p in descendants(server.pid)
            if b"pybackend.stub" in Path(f"/proc/{p}/cmdline").read_bytes()
        }
        memory = device_memory_mib(stubs)
        client.unload_model("gpu_ident")
        return seen, memory
    finally:
        client.close()


@pytest.mark.skipif(shutil.which("nvidia-smi") is None, reason="needs nvidia-smi")
def test_two_gpu_instances_share_one_context(
    server: TritonServer, record_property: Callable[[str, object], None]
) -> None:
    shared, shared_mib = load(server, "shared")
    own, own_mib = load(server, "own")
    record_property("device_memory_shared_mib", shared_mib)
    record_property("device_memory_own_mib", own_mib)
    assert len(shared) == 2 and len(own) == 2
    assert len({a["pid"] for a in shared}) == 1
    assert len({a["thread"] for a in shared}) == 2
    assert all(a["rc"] == 0 and a["context"] != 0 for a in shared), shared
    # cuCtxGetCurrent on each instance's thread: the same (primary) context.
    assert len({a["context"] for a in shared}) == 1, shared
    assert all(a["torch_device"] == 0 and a["sum"] == 1024 * 1024 for a in shared)
    assert len({a["pid"] for a in own}) == 2
    # One context less: a CUDA context costs well over 100 MiB on current drivers.
    assert own_mib - shared_mib >= 100, (own_mib, shared_mib)
