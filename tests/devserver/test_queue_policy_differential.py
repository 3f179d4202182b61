"""The development server's dynamic-batcher queue against tritonserver 2.51's: priority
levels order the queue, a full level refuses at once, a request that waited past its
level's timeout (or its own shorter one, where allowed) is refused (REJECT) or goes behind
the others (DELAY), with the same texts and statuses on both protocols, and in the same
order of execution."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any, Dict, List, Tuple, Union

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from side_by_side import MODES, side_by_side

# Answers each request with its place in the order of execution. A request whose X is
# negative holds the instance for a second, so that the requests after it queue up.
ORDER = """
import itertools
import time
import numpy as np
import triton_python_backend_utils as pb_utils

_turn = itertools.count()

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for r in requests:
            if pb_utils.get_input_tensor_by_name(r, "X").as_numpy()[0, 0] < 0:
                time.sleep(1.0)
            turn = np.array([[next(_turn)]], np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", turn)]))
        return responses
"""
CONFIG = """
backend: "python"
max_batch_size: 1
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
dynamic_batching {{ {batching} }}
"""
FULL = "[request id: <id_unknown>] Exceeds maximum queue size"
EXPIRED = "Request timeout expired"
RAN = "ran"  # executed, in an order not compared
# model: (dynamic_batching body, the requests after the holding one (client arguments,
# "pause": seconds before the next), each one's turn after the holder or the error text)
Outcome = Union[int, str]
CASES: Dict[str, Tuple[str, List[Dict[str, Any]], List[Outcome]]] = {
    "queue_size": ("default_queue_policy { max_queue_size: 2 }", [{}] * 4, [1, 2, FULL, FULL]),
    "reject": (
        "default_queue_policy { default_timeout_microseconds: 300000 }",
        [{}, {}],
        [EXPIRED, EXPIRED],
    ),
    # The first request waits out its 0.3 s while the holder runs, and is not refused. Where
    # it goes then is not the same from run to run on tritonserver (after both later ones,
    # or between them): only that all three run is compared (RAN).
    "delay": (
        "default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 300000 }",
        [{"pause": 0.6}, {}, {}],
        [RAN, RAN, RAN],
    ),
    # Level 1 first; no priority, or one past the levels: the default level 2.
    "priority": (
        "priority_levels: 2 default_priority_level: 2",
        [{"priority": 2}, {"priority": 2}, {"priority": 1}, {}, {"priority": 5}],
        [2, 3, 1, 4, 5],
    ),
    # A request's own timeout counts where the policy allows it and it is shorter than the
    # default: here both wait 0.8 s, only the 0.1 s one is refused.
    "override": (
        "default_queue_policy { allow_timeout_override: true "
        "default_timeout_microseconds: 5000000 }",
        [{"timeout": 100000}, {"timeout": 10000000}],
        [EXPIRED, 1],
    ),
    # Never where no default is set, nor where the policy does not allow it.
    "no_default": (
        "default_queue_policy { allow_timeout_override: true }",
        [{"timeout": 100000}],
        [1],
    ),
    "not_allowed": (
        "default_queue_policy { default_timeout_microseconds: 5000000 }",
        [{"timeout": 100000}],
        [1],
    ),
    "level_size": (
        "priority_levels: 2 default_priority_level: 2 "
        "priority_queue_policy { key: 1 value { max_queue_size: 1 } }",
        [{"priority": 1}, {"priority": 1}, {}, {}],
        [1, FULL, 2, 3],
    ),
}


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = tmp_path_factory.mktemp("queue")
    for name, (batching, _, _) in CASES.items():
        (repo / name / "1").mkdir(parents=True)
        (repo / name / "1" / "model.py").write_text(ORDER)
        (repo / name / "config.pbtxt").write_text(CONFIG.format(batching=batching))
    with side_by_side(repo, request.param) as pair:
        yield pair


def _outcomes(server: Any, model: str, sent: List[Dict[str, Any]], protocol: str) -> list:
    """Each request's turn after the holder's, or its error as the client shows it."""
    grpc = protocol == "grpc"
    shared = grpcclient.InferenceServerClient(server.grpc_url) if grpc else None
    results: list = [None] * (len(sent) + 1)

    def send(i: int, value: float, options: Dict[str, Any]) -> None:
        # tritonclient's HTTP client must not be shared between threads; its gRPC one can.
        client = shared or httpclient.InferenceServerClient(server.http_url)
        module = grpcclient if grpc else httpclient
        x = module.InferInput("X", [1, 1], "FP32")
        x.set_data_from_numpy(np.array([[value]], np.float32))
        try:
            results[i] = int(client.infer(model, [x], **options).as_numpy("Y")[0, 0])
        except Exception as e:  # noqa: BLE001 - the refusal is what is compared
            results[i] = str(e)
        finally:
            if shared is None:
                client.close()

    threads = []
    for i, options in enumerate([{"pause": 0.2}, *sent]):
        options = dict(options)
        # 60 ms between sends: with 20 ms a loaded CI machine started two threads' requests
        # in the wrong order once (level_size: turns 3, 2 for 2, 3). The holder's 1 s covers
        # every case's sends still.
        pause = options.pop("pause", 0.06)
        threads.append(threading.Thread(target=send, args=(i, -1.0 if i == 0 else 1.0, options)))
        threads[-1].start()
        time.sleep(pause)
    for t in threads:
        t.join()
    if shared is not None:
        shared.close()
    holder = results[0]
    assert isinstance(holder, int), holder
    return [r - holder if isinstance(r, int) else r for r in results[1:]]


def _counts(server: Any, model: str) -> Dict[str, int]:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        stats = client.get_inference_statistics(model)["model_stats"][0]
    finally:
        client.close()
    counts = {k: int(v["count"]) for k, v in stats["inference_stats"].items()}
    return {**counts, "executions": int(stats["execution_count"])}


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("model", list(CASES))
def test_the_queue_acts_as_tritonservers(
    servers: Tuple[Any, Any], model: str, protocol: str
) -> None:
    real, dev = servers
    _, sent, expected = CASES[model]
    got_real = _outcomes(real, model, sent, protocol)
    got_dev = _outcomes(dev, model, sent, protocol)
    if RAN in expected:
        got_real, got_dev = (
            [RAN if isinstance(r, int) else r for r in got] for got in (got_real, got_dev)
        )
    assert got_dev == got_real
    # A full queue's refusals count nowhere, a timeout's in fail (both servers have seen the
    # same requests of this model so far).
    assert _counts(dev, model) == _counts(real, model)
    status = "StatusCode.UNAVAILABLE" if protocol == "grpc" else "[503]"
    for outcome, want in zip(got_real, expected):
        if isinstance(want, int) or want == RAN:
            assert outcome == want
        else:
            assert isinstance(outcome, str) and want in outcome and status in outcome
