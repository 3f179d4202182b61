"""The development server's gRPC service against tritonserver 2.51 with our backend:
unary and streaming inference (decoupled models, the final-response flags, empty final
responses on request), errors and metadata come back the same from both."""

from __future__ import annotations

import queue
from typing import Any, List

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

Summary = List[Any]


def _inputs() -> dict:
    prompt = grpcclient.InferInput("PROMPT", [1], "BYTES")
    prompt.set_data_from_numpy(np.array([b"a b c"], dtype=object))
    a = grpcclient.InferInput("INPUT0", [4], "FP32")
    a.set_data_from_numpy(np.arange(4, dtype=np.float32))
    b = grpcclient.InferInput("INPUT1", [4], "FP32")
    b.set_data_from_numpy(np.ones(4, dtype=np.float32))
    bad = grpcclient.InferInput("INPUT0", [2], "FP32")
    bad.set_data_from_numpy(np.ones(2, dtype=np.float32))
    return {"prompt": [prompt], "add_sub": [a, b], "error": [bad]}


def _response(result: Any) -> Summary:
    resp = result.get_response()
    params = {k: v.bool_param for k, v in resp.parameters.items()}
    outputs = {o.name: result.as_numpy(o.name).tolist() for o in resp.outputs}
    return [resp.model_name, resp.id, outputs, params]


def _stream(client: Any, model: str, inputs: list, final_marks: bool) -> Summary:
    """Every response of one streamed request, until its final flag or an error."""
    got: "queue.Queue[Any]" = queue.Queue()
    client.start_stream(callback=lambda result, error: got.put((result, error)))
    try:
        client.async_stream_infer(
            model, inputs, request_id="s-1", enable_empty_final_response=final_marks
        )
        out: Summary = []
        while True:
            result, error = got.get(timeout=30)
            if error is not None:
                out.append(["error", str(error.message())])
                return out
            out.append(_response(result))
            if out[-1][3].get("triton_final_response"):
                return out
            if not final_marks and model == "token_stream" and len(out) == 3:
                return out  # without final marks, only the count says it is over
    finally:
        client.stop_stream()


def _unary(client: Any, model: str, inputs: list) -> Summary:
    try:
        return _response(client.infer(model, inputs, request_id="u-1"))
    except grpcclient.InferenceServerException as e:
        return ["error", str(e.status()), e.message()]


def _call(client: Any, what: str) -> Summary:
    inputs = _inputs()
    if what == "metadata":
        return [str(client.get_model_metadata("string_echo"))]
    if what == "metadata of an unknown model":
        try:
            client.get_model_metadata("nope")
        except grpcclient.InferenceServerException as e:
            return [str(e.status()), e.message()]
    if what == "configuration":
        names = ["add_sub", "string_echo", "token_stream", "bls_pipeline", "batched_scale"]
        return [str(client.get_model_config(name)) for name in names]
    if what == "readiness":
        return [client.is_server_live(), client.is_server_ready(), client.is_model_ready("nope")]
    if what == "repository index":
        return [str(client.get_model_repository_index())]
    kind, model, key = what.split(":")
    if kind == "unary":
        return _unary(client, model, inputs[key])
    return _stream(client, model, inputs[key], final_marks=kind == "stream+final")


CALLS = [
    "metadata",
    "metadata of an unknown model",
    "configuration",
    "readiness",
    "repository index",
    "unary:add_sub:add_sub",
    "unary:error_model:error",
    "unary:token_stream:prompt",
    "unary:nope:add_sub",
    "stream:token_stream:prompt",
    "stream+final:token_stream:prompt",
    "stream:add_sub:add_sub",
    "stream+final:add_sub:add_sub",
    "stream:error_model:error",
]


@pytest.mark.parametrize("what", CALLS)
def test_same_answer_as_tritonserver(what: str, devserver: Any, examples_server: Any) -> None:
    real = grpcclient.InferenceServerClient(examples_server.grpc_url)
    dev = grpcclient.InferenceServerClient(devserver.grpc_url)
    try:
        assert _call(dev, what) == _call(real, what)
    finally:
        real.close()
        dev.close()
