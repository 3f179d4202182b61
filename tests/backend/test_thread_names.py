"""The threads the backend starts inside tritonserver carry names (csrc/backend/
thread_name.h), so an operator's `top -H` / `ps -L` and a profiler tell them from Triton's
own: one pb_monitor per instance, one pb_restarter per instance (restarts are on by
default) and, once a copy is big enough to be split, the pb_copy helpers."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import numpy as np
import tritonclient.http as httpclient

from integration_support.echo_model import write_echo_repository
from pybackend.server import TritonServer


def _thread_names(pid: int) -> Counter[str]:
    names: Counter[str] = Counter()
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names[(task / "comm").read_text().strip()] += 1
        except OSError:  # the thread ended meanwhile
            pass
    return names


def test_backend_threads_are_named(tmp_path: Path) -> None:
    write_echo_repository(tmp_path, instances=2)
    with TritonServer(tmp_path, backend="ours") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        x = np.arange(3_000_000, dtype=np.float32)  # 12 MB: copies split over the helpers
        inp = httpclient.InferInput("X", list(x.shape), "FP32")
        inp.set_data_from_numpy(x)
        np.testing.assert_array_equal(client.infer("echo", [inp]).as_numpy("Y"), x * 2)
        client.close()  # an open keep-alive connection holds the server's exit up
        names = _thread_names(server.pid)
        assert names["pb_monitor"] == 2, names
        assert names["pb_restarter"] == 2, names
        if len(os.sched_getaffinity(server.pid)) > 1:  # one core: copies are not split
            assert names["pb_copy"] >= 1, names
