"""A model's ``instance_group`` count under the development server against tritonserver 2.51
with our backend: every instance runs (``initialize`` each, with tritonserver's instance
names), concurrent requests and batches run on different instances at once, a sequence
stays on one instance (its state lives there), the instances count into one statistics
entry, and their custom metrics share one registry (a series of the same labels is one)."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import tritonclient.http as httpclient
from side_by_side import MODES, side_by_side

from conformance_support.metrics_endpoint import samples, scrape

SLOW = """
import json
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]

    def execute(self, requests):
        time.sleep(0.4)  # long enough for the other requests to need the other instance
        responses = []
        for request in requests:
            shape = pb_utils.get_input_tensor_by_name(request, "X").as_numpy().shape
            out = np.full(shape, self.name.encode(), dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("NAME", out)]))
        return responses
"""
SLOW_CONFIG = """
backend: "python"
max_batch_size: {max_batch_size}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "NAME" data_type: TYPE_STRING dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU, count: 2 }} ]
{batching}
"""
SEQUENCE = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.name = args["model_instance_name"]
        self.sums = {}

    def execute(self, requests):
        responses = []
        for request in requests:
            key = request.correlation_id()
            x = float(pb_utils.get_input_tensor_by_name(request, "X").as_numpy()[0])
            self.sums[key] = self.sums.get(key, 0.0) + x
            seen = json.dumps({"sum": self.sums[key], "instance": self.name})
            out = np.array([seen.encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", out)]))
        return responses
"""
SEQUENCE_CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] } ]
instance_group [ { kind: KIND_CPU, count: 2 } ]
sequence_batching { max_sequence_idle_microseconds: 60000000 }
"""
METRICS_SHARED = (
    Path(__file__).resolve().parents[1] / "conformance" / "metrics" / "models" / "metrics_shared"
)


def _write(root: Path, name: str, source: str, config: str) -> None:
    (root / name / "1").mkdir(parents=True)
    (root / name / "1" / "model.py").write_text(source)
    (root / name / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = tmp_path_factory.mktemp("instances")
    _write(repo, "slow", SLOW, SLOW_CONFIG.format(max_batch_size=0, batching=""))
    batching = "dynamic_batching { max_queue_delay_microseconds: 0 }"
    _write(repo, "slow_batched", SLOW, SLOW_CONFIG.format(max_batch_size=2, batching=batching))
    _write(repo, "sequence", SEQUENCE, SEQUENCE_CONFIG)
    shutil.copytree(METRICS_SHARED, repo / "metrics_shared")
    with side_by_side(repo, request.param) as pair:
        yield pair


def _x(value: float, batched: bool = False) -> List[Any]:
    tensor = httpclient.InferInput("X", [1, 1] if batched else [1], "FP32")
    tensor.set_data_from_numpy(np.full((1, 1) if batched else (1,), value, np.float32))
    return [tensor]


def _names_of_concurrent(server: Any, model: str, count: int) -> List[str]:
    """The instance names that answered ``count`` requests sent at once."""
    client = httpclient.InferenceServerClient(server.http_url, concurrency=count)
    try:
        batched = model == "slow_batched"
        pending = [client.async_infer(model, _x(1.0, batched)) for _ in range(count)]
        return [p.get_result().as_numpy("NAME").reshape(-1)[0].decode() for p in pending]
    finally:
        client.close()


@pytest.mark.parametrize("model, count", [("slow", 2), ("slow_batched", 4)])
def test_concurrent_requests_use_every_instance(
    model: str, count: int, servers: Tuple[Any, Any]
) -> None:
    seen = [set(_names_of_concurrent(server, model, count)) for server in servers]
    assert seen[1] == seen[0] == {f"{model}_0_0", f"{model}_0_1"}


def test_instances_count_into_one_statistics_entry(servers: Tuple[Any, Any]) -> None:
    counts = []
    for server in servers:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            before = client.get_inference_statistics("slow")["model_stats"][0]
            _names_of_concurrent(server, "slow", 2)
            after = client.get_inference_statistics("slow")["model_stats"][0]
        finally:
            client.close()
        counts.append(
            (
                after["inference_count"] - before["inference_count"],
                after["execution_count"] - before["execution_count"],
            )
        )
    assert counts[1] == counts[0] == (2, 2)


def _sequence(server: Any) -> Dict[int, List[Dict[str, Any]]]:
    """Two sequences, their requests interleaved: what each request saw."""
    client = httpclient.InferenceServerClient(server.http_url)
    seen: Dict[int, List[Dict[str, Any]]] = {1001: [], 1002: []}
    try:
        steps = [(1001, 1.0), (1002, 10.0), (1001, 2.0), (1002, 20.0), (1001, 3.0), (1002, 30.0)]
        for i, (sequence_id, value) in enumerate(steps):
            result = client.infer(
                "sequence",
                _x(value),
                sequence_id=sequence_id,
                sequence_start=i < 2,
                sequence_end=i >= 4,
            )
            seen[sequence_id].append(json.loads(result.as_numpy("SEEN")[0]))
    finally:
        client.close()
    return seen


def test_a_sequence_stays_on_its_instance(servers: Tuple[Any, Any]) -> None:
    results = [_sequence(server) for server in servers]
    for seen in results:
        for steps in seen.values():
            assert len({step["instance"] for step in steps}) == 1, seen
    sums = [{k: [s["sum"] for s in v] for k, v in seen.items()} for seen in results]
    assert sums[1] == sums[0] == {1001: [1.0, 3.0, 6.0], 1002: [10.0, 30.0, 60.0]}


def test_instances_share_their_custom_metrics(servers: Tuple[Any, Any]) -> None:
    found = []
    for server in servers:
        client = httpclient.InferenceServerClient(server.http_url)
        try:
            tensor = httpclient.InferInput("IN", [1], "FP64")
            tensor.set_data_from_numpy(np.array([0.5]))
            result = json.loads(client.infer("metrics_shared", [tensor]).as_numpy("RESULT")[0])
        finally:
            client.close()
        series = samples(scrape(server), "pbconf_shared_total")
        shared = {k: v for k, v in series.items() if ("model", "metrics_shared") in k[1]}
        own = sorted(v for k, v in series.items() if k[1][0][0] == "instance")
        found.append((result["shared"], list(shared.values()), own))
    # initialize counted 1 in each instance's own series and 2 in the shared one, whose
    # value() every instance reads
    assert found[1] == found[0] == (2.5, [2.5], [1.0, 1.5])
