"""The GPU lending pool's switch (PYBACKEND_GPU_LEND_POOL, csrc/cuda/device_holds.h, docs/gpu.md
"Where the time goes") reaches every stub the backend starts as the backend decided it: the
stub keeps its mappings of lent device memory exactly when the backend keeps that memory, so
the two sides can never disagree (a mapping kept of memory the backend freed would outlive it).
On unless "0", "false", "off" or "no". No GPU needed: the decision and the variable are the
same without one."""

from __future__ import annotations

from pathlib import Path

import pytest
import tritonclient.http as httpclient

from integration_support.clients import probe_answer
from pybackend.server import TritonServer

CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "POOL", data_type: TYPE_STRING, dims: [ 1 ] } ]
parameters { key: "PYBACKEND_INSTANCE_PROCESS" value: { string_value: "%s" } }
"""

MODEL = """
import os

import numpy as np
import triton_python_backend_utils as pb_utils

from pybackend.stub.gpu import GpuMappings


class TritonPythonModel:
    def execute(self, requests):
        seen = os.environ.get("PYBACKEND_GPU_LEND_POOL", "unset")
        keeps = GpuMappings(lambda hold: None).keep_lent
        out = np.array([f"{seen} {keeps}".encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("POOL", out)]) for _ in requests]
"""


def seen_by_the_stub(server: TritonServer) -> str:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        return probe_answer(client, "pool_probe", "POOL").decode()
    finally:
        client.close()


@pytest.mark.parametrize(
    ("server_env", "stub_sees"),
    [(None, "1 True"), ("0", "0 False"), ("1", "1 True"), ("Off", "0 False"), ("yes", "1 True")],
    ids=["unset", "0", "1", "Off", "yes"],
)
@pytest.mark.parametrize("mode", ["own", "shared"])
def test_the_stub_is_told_the_backends_decision(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    server_env: str | None,
    stub_sees: str,
    mode: str,
) -> None:
    if server_env is None:
        monkeypatch.delenv("PYBACKEND_GPU_LEND_POOL", raising=False)
    else:
        monkeypatch.setenv("PYBACKEND_GPU_LEND_POOL", server_env)
    version = tmp_path / "models" / "pool_probe" / "1"
    version.mkdir(parents=True)
    (version.parent / "config.pbtxt").write_text(CONFIG % mode)
    (version / "model.py").write_text(MODEL)
    with TritonServer(tmp_path / "models", backend="ours") as server:
        assert seen_by_the_stub(server) == stub_sees
