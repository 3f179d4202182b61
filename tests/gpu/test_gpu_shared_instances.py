"""KIND_GPU instances in one process (PYBACKEND_INSTANCE_PROCESS=shared, issue 29), two and
four of them: every instance thread has the same CUDA context current (the device's primary
context, so one context for the model instead of one per instance), and the model's
processes use less device memory than the same model under `own`, by a context for each
instance past the first.

Needs an NVIDIA GPU (skipped by conftest.py elsewhere). Device memory is read two ways: the
driver's device-wide view (total - free) with the model loaded against before it, and, where
nvidia-smi lists processes (the Firecracker H200 machines do; gVisor's do not), the model's
own processes. The count-2 case passed on an H200 on 2026-11-29 (own 1,275 MiB, shared 637
MiB); the count-4 case was added after that run and has not run on a GPU yet."""

from __future__ import annotations

import importlib.util
import json
import textwrap
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from gpu_support import compute_apps, device_used_bytes, process_memory_mib, serve, wait_for

from pybackend.server import TritonServer
from pybackend.server.processes import descendants

pytestmark = pytest.mark.gpu

MiB = 1 << 20
#: A CUDA context costs several hundred MiB of device memory on current drivers (its code,
#: stacks and heap); 100 MiB is well under one and well over allocator noise.
CONTEXT_MIB = 100
#: What one instance's weights (4 MiB) and the allocator's rounding may add to a process.
SLACK_MIB = 32
#: How long each execute takes, so that requests sent at once are on every instance.
HOLD_S = 0.3

MODEL_PY = textwrap.dedent(
    """
    import ctypes
    import json
    import os
    import threading
    import time

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
            time.sleep(HOLD_S)
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


def config(mode: str, count: int) -> str:
    return json.dumps(
        {
            "backend": "python",
            "max_batch_size": 0,
            "input": [{"name": "OP", "data_type": "TYPE_INT32", "dims": [1]}],
            "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
            "instance_group": [{"count": count, "kind": "KIND_GPU", "gpus": [0]}],
            "parameters": {"PYBACKEND_INSTANCE_PROCESS": {"string_value": mode}},
        }
    )


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repo = tmp_path_factory.mktemp("gpu_shared")
    (repo / "gpu_ident" / "1").mkdir(parents=True)
    model_py = MODEL_PY.replace("HOLD_S", repr(HOLD_S))
    (repo / "gpu_ident" / "1" / "model.py").write_text(model_py)
    with serve(repo, model_control_mode="explicit") as s:
        yield s


def stub_pids(server: TritonServer) -> set[int]:
    """Our stub processes under the server: `own` stubs and a `shared` host alike."""
    found = set()
    for pid in descendants(server.pid):
        try:
            if b"pybackend.stub" in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:  # it ended meanwhile
            pass
    return found


def answers(server: TritonServer, count: int) -> list[dict[str, Any]]:
    """One answer from each of the ``count`` instances. Each execute takes HOLD_S, so of
    ``count`` requests sent at once Triton gives each to an idle instance; a few rounds make
    sure (sequential requests could all land on one instance)."""
    import tritonclient.grpc as grpcclient

    def one(_: int) -> dict[str, Any]:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            inp = grpcclient.InferInput("OP", [1], "INT32")
            inp.set_data_from_numpy(np.array([0], np.int32))
            result = client.infer("gpu_ident", [inp], client_timeout=120)
            return json.loads(result.as_numpy("OUT")[0])
        finally:
            client.close()

    found: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(count) as pool:
        for _ in range(5):
            for a in pool.map(one, range(count)):
                found[a["instance"]] = a
            if len(found) == count:
                break
    return list(found.values())


#: How close to its level before a load the device's memory must come back after the unload
#: (MiB): the driver frees an ended process's context a little after the process is gone,
#: and a load measured against memory still being freed looks a context smaller (the first
#: run on an H200 measured own and shared alike, 637 MiB, that way).
SETTLE_MIB = 32


@dataclass
class Loaded:
    """What one load of gpu_ident under a mode showed."""

    answers: list[dict[str, Any]]
    processes: int
    #: Device memory the loaded model added: the driver's total - free, against before.
    device_mib: int
    #: nvidia-smi's memory of the model's processes, summed; None where it lists none.
    process_mib: int | None


def load(server: TritonServer, mode: str, count: int) -> Loaded:
    """Loads gpu_ident under ``mode`` and reads what it costs: the device-wide view (total -
    free, which holds where nvidia-smi cannot see the processes of this PID namespace) and,
    where nvidia-smi lists processes, the model's own. Unloads it, waits for its stubs to
    end and for the device's memory to come back, so the next load starts from the same."""
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        before = device_used_bytes()
        client.load_model("gpu_ident", config=config(mode, count))
        seen = answers(server, count)
        pids = stub_pids(server)
        added = (device_used_bytes() - before) // MiB
        per_process = process_memory_mib()
        own_mib = sum(per_process.get(p, 0) for p in pids) if per_process else None
        client.unload_model("gpu_ident")
        wait_for(
            "the model's stubs to end after its unload",
            lambda: True if not stub_pids(server) else None,
            timeout=60,
        )
        wait_for(
            f"the device memory of {mode}'s ended stubs to be freed (within {SETTLE_MIB} MiB "
            f"of the {before // MiB} MiB before the load)\n{compute_apps()}",
            lambda: True if device_used_bytes() - before <= SETTLE_MIB * MiB else None,
            timeout=30,
        )
        return Loaded(seen, len(pids), added, own_mib)
    finally:
        client.close()


def saved_contexts_mib(own: int, shared: int, count: int) -> tuple[int, float]:
    """(what shared saves against own, what (count - 1) contexts are worth): a context's
    worth is what one process under own costs, less SLACK_MIB for its instance's weights and
    allocator rounding, and never under CONTEXT_MIB."""
    worth = max(own / count - SLACK_MIB, CONTEXT_MIB)
    return own - shared, (count - 1) * worth


@pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="the model computes with torch"
)
@pytest.mark.parametrize("count", [2, 4])
def test_gpu_instances_share_one_context(
    server: TritonServer, record_property: Callable[[str, object], None], count: int
) -> None:
    """count KIND_GPU instances: one process and one context under shared, and (issue 29's
    goal for 4) count - 1 contexts' worth of device memory less than under own."""
    pytest.importorskip("cupy", reason="device memory is read with cupy (gpu_support)")
    shared = load(server, "shared", count)
    own = load(server, "own", count)
    record_property("device_memory_shared_mib", shared.device_mib)
    record_property("device_memory_own_mib", own.device_mib)
    record_property("process_memory_shared_mib", shared.process_mib)
    record_property("process_memory_own_mib", own.process_mib)
    assert len(shared.answers) == count and len(own.answers) == count, (shared, own)
    assert shared.processes == 1 and own.processes == count, (shared, own)
    assert len({a["pid"] for a in shared.answers}) == 1
    assert len({a["thread"] for a in shared.answers}) == count
    assert all(a["rc"] == 0 and a["context"] != 0 for a in shared.answers), shared
    # cuCtxGetCurrent on each instance's thread: the same (primary) context.
    assert len({a["context"] for a in shared.answers}) == 1, shared
    assert all(a["torch_device"] == 0 and a["sum"] == 1024 * 1024 for a in shared.answers)
    assert len({a["pid"] for a in own.answers}) == count
    measured = f"own: {own}\nshared: {shared}\n{compute_apps()}"
    saved, worth = saved_contexts_mib(own.device_mib, shared.device_mib, count)
    assert saved >= worth, f"saved {saved} MiB, {count - 1} contexts are {worth:.0f}\n{measured}"
    if own.process_mib is not None and shared.process_mib is not None:
        saved, worth = saved_contexts_mib(own.process_mib, shared.process_mib, count)
        assert saved >= worth, f"per process: saved {saved}, wanted {worth:.0f}\n{measured}"
