"""The sequence batcher's idle timeout in the development server (and the offline harness it
runs models with) against tritonserver 2.51: a sequence with no request for
max_sequence_idle_microseconds (1 s when unset), counted from its last request's arrival
even while the model still runs it, is ended, and its next request is refused unless it
starts the sequence again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any, List, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from side_by_side import MODES, side_by_side

# X < 0 keeps the model busy for 0.6 s.
ECHO = """
import time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        if pb_utils.get_input_tensor_by_name(requests[0], "X").as_numpy()[0] < 0:
            time.sleep(0.6)
        return [
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]
            )
            for r in requests
        ]
"""
CONFIG = """
backend: "python"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
sequence_batching {{ {idle} }}
"""
# (start, end, seconds to wait before, X) of each request of one sequence
Step = Tuple[bool, bool, float, float]
CASES: List[Tuple[str, List[Step]]] = [
    # The default idle time is 1 s.
    ("default_idle", [(True, False, 0, 1.0), (False, False, 1.5, 1.0), (False, True, 0, 1.0)]),
    # Each request keeps it alive; after 0.5 s of 0.3 s allowed only a new START helps.
    (
        "short_idle",
        [
            (True, False, 0, 1.0),
            (False, False, 0.1, 1.0),
            (False, False, 0.1, 1.0),
            (False, False, 0.5, 1.0),
            (True, False, 0, 1.0),
            (False, True, 0.1, 1.0),
        ],
    ),
    # Counted from the arrival: a 0.6 s execute outlasts 0.3 s of idle time.
    ("short_idle", [(True, False, 0, -1.0), (False, True, 0, 1.0)]),
]
REFUSED = "must specify the START flag on the first request of the sequence"


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = tmp_path_factory.mktemp("sequences")
    idle_times = {"default_idle": "", "short_idle": "max_sequence_idle_microseconds: 300000"}
    for name, idle in idle_times.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(ECHO)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(idle=idle))
    with side_by_side(repo, request.param) as pair:
        yield pair


def _outcomes(server: Any, model: str, sequence: int, steps: List[Step]) -> List[str]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    outcomes = []
    try:
        for start, end, pause, value in steps:
            time.sleep(pause)
            x = grpcclient.InferInput("X", [1], "FP32")
            x.set_data_from_numpy(np.array([value], np.float32))
            try:
                client.infer(
                    model, [x], sequence_id=sequence, sequence_start=start, sequence_end=end
                )
                outcomes.append("ok")
            except Exception as e:  # noqa: BLE001 - the refusal is what is compared
                outcomes.append(str(e))
    finally:
        client.close()
    return outcomes


@pytest.mark.parametrize("case", range(len(CASES)))
def test_an_idle_sequence_ends_as_in_tritonserver(servers: Tuple[Any, Any], case: int) -> None:
    real, dev = servers
    model, steps = CASES[case]
    got = _outcomes(real, model, 100 + case, steps)
    assert _outcomes(dev, model, 100 + case, steps) == got
    refused = [REFUSED in outcome for outcome in got]
    assert (
        refused
        == [
            [False, True, True],
            [False, False, False, True, False, False],
            [False, True],
        ][case]
    )
