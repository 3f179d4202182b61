"""Response parameters set by the model (``InferenceResponse(parameters=...)``) through the
development server and through tritonserver 2.51 with our backend: the same ``parameters``
object over HTTP (JSON and binary outputs), the same keys beside the outputs of
``generate`` and ``generate_stream``, the same ``InferParameter`` map over gRPC, unary and
streamed (beside ``triton_final_response``)."""

from __future__ import annotations

import json
import queue
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from http_exchange import exchange, infer_body
from side_by_side import MODES, copied, side_by_side

TESTS = Path(__file__).resolve().parents[1]
MODELS = [
    TESTS / "conformance" / "execute_semantics" / "models" / "response_params",
    TESTS / "models" / "param_stream",  # decoupled: N responses, parameters on every other
]


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    repo = copied(tmp_path_factory, "response_parameters", *MODELS)
    with side_by_side(repo, request.param) as pair:
        yield pair


def _path(which: str) -> Dict[str, Any]:
    return {"inputs": [{"name": "PATH", "datatype": "BYTES", "shape": [1], "data": [which]}]}


EXPECTED = {"text": "hello", "number": 42, "negative": -7, "yes": True, "no": False}
HTTP_CASES = {
    "returned, JSON": ("response_params/infer", {**_path("return"), "id": "r-1"}),
    "sent, JSON": ("response_params/infer", _path("sender")),
    "returned, binary": (
        "response_params/infer",
        {**_path("return"), "parameters": {"binary_data_output": True}},
    ),
    "generate": ("response_params/generate", {"PATH": "return"}),
    "generate_stream": ("response_params/generate_stream", {"PATH": "sender", "id": "g-1"}),
    "generate_stream of a stream": ("param_stream/generate_stream", {"N": 3}),
}


def _parameters(reply: Any) -> List[Dict[str, Any]]:
    """The parameters of each response in a reply: an infer body's ``parameters`` (its JSON
    header where outputs went binary), or the keys of each generated object beside OUT."""
    if isinstance(reply, tuple):
        reply = reply[0]
    if isinstance(reply, dict) and "outputs" in reply:
        return [reply.get("parameters", {})]
    objects = [reply] if isinstance(reply, dict) else [
        json.loads(event[len("data: "):]) for event in reply.decode().split("\n\n") if event
    ]  # fmt: skip
    server_keys = {"OUT", "id", "model_name", "model_version"}
    return [{k: v for k, v in o.items() if k not in server_keys} for o in objects]


@pytest.mark.parametrize("case", list(HTTP_CASES))
def test_http_answers_alike(case: str, servers: Tuple[Any, Any]) -> None:
    path, header = HTTP_CASES[case]
    body, headers = infer_body(header)
    answers = [
        exchange(server.http_url, "POST", f"/v2/models/{path}", body, headers) for server in servers
    ]
    assert answers[1] == answers[0]
    status, reply = answers[0]
    assert status == 200
    # The model's parameters are there (not dropped by both alike).
    if path.startswith("param_stream"):
        assert _parameters(reply) == [{"index": 0, "last": False}, {}, {"index": 2, "last": True}]
    else:
        assert _parameters(reply) == [EXPECTED]


def _summary(result: Any) -> List[Any]:
    resp = result.get_response()
    # Each InferParameter as text: its kind (bool, int64, string) is compared too.
    params = {k: str(v).strip() for k, v in resp.parameters.items()}
    return [resp.id, {o.name: result.as_numpy(o.name).tolist() for o in resp.outputs}, params]


def _grpc(url: str, model: str, streamed: bool) -> List[Any]:
    client = grpcclient.InferenceServerClient(url)
    if model == "param_stream":
        tensor = grpcclient.InferInput("N", [1], "INT32")
        tensor.set_data_from_numpy(np.array([3], np.int32))
    else:
        tensor = grpcclient.InferInput("PATH", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([b"sender"], dtype=object))
    try:
        if not streamed:
            return [_summary(client.infer(model, [tensor], request_id="u-1"))]
        got: "queue.Queue[Any]" = queue.Queue()
        client.start_stream(callback=lambda result, error: got.put((result, error)))
        client.async_stream_infer(
            model, [tensor], request_id="s-1", enable_empty_final_response=True
        )
        out: List[Any] = []
        while True:
            result, error = got.get(timeout=30)
            assert error is None, error
            out.append(_summary(result))
            if out[-1][2].get("triton_final_response") == "bool_param: true":
                client.stop_stream()
                return out
    finally:
        client.close()


@pytest.mark.parametrize(
    "model,streamed",
    [("response_params", False), ("response_params", True), ("param_stream", True)],
)
def test_grpc_answers_alike(model: str, streamed: bool, servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    expected = _grpc(real.grpc_url, model, streamed)
    assert _grpc(dev.grpc_url, model, streamed) == expected
    assert any("int64_param: 42" in r[2].values() or "index" in r[2] for r in expected)
