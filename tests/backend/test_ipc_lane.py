"""The sync lane (csrc/ipc/lane.h, pybackend/ipc/lane.py) and the socket-only path it can
be turned off for (backend config ipc-lane=false, and every non-x86-64 build) both carry
EXECUTE/RESULT correctly through the real server: inline tensors, arena tensors, a tensor
big enough to need a new segment (its SEGMENT_ADD must be read before the EXECUTE that
names it), and a run of requests back to back; and the BLS calls that `execute` makes on
the sync channel (three per request of the BLS pipeline example)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient

from integration_support.bls_pipeline import BLS_PIPELINE_MODELS, check_bls_pipeline
from integration_support.echo_model import write_echo_repository
from pybackend.server import TritonServer

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "model_repository"


@pytest.mark.parametrize("lane", ["true", "false"])
def test_execute_round_trips(tmp_path: Path, lane: str) -> None:
    write_echo_repository(tmp_path)
    with TritonServer(tmp_path, backend="ours", backend_config=[f"ipc-lane={lane}"]) as server:
        client = httpclient.InferenceServerClient(server.http_url)
        # inline, arena, and 12 MB: more than the first segment, so a new one is announced
        sizes = [4, 4000, 3_000_000] + [16] * 50
        for i, n in enumerate(sizes):
            x = np.arange(n, dtype=np.float32) + i
            inp = httpclient.InferInput("X", [n], "FP32")
            inp.set_data_from_numpy(x)
            result = client.infer("echo", [inp])
            np.testing.assert_array_equal(result.as_numpy("Y"), x * 2)
        client.close()  # an open keep-alive connection holds the server's exit up


@pytest.mark.parametrize("lane", ["true", "false"])
def test_bls_calls_on_sync(lane: str) -> None:
    with TritonServer(
        EXAMPLES,
        backend="ours",
        backend_config=[f"ipc-lane={lane}"],
        model_control_mode="explicit",
        load_models=BLS_PIPELINE_MODELS,
    ) as server:
        check_bls_pipeline(server, 30)
