"""The development server's HTTP endpoints against tritonserver 2.51 with our backend, on
the same model repository: every request below gets the same status and the same body
(outputs, their datatypes and shapes, binary layout, error texts) from both."""

from __future__ import annotations

import struct
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
from http_exchange import exchange, infer_body

ADD_SUB = [
    {"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]},
    {"name": "INPUT1", "datatype": "FP32", "shape": [4], "data": [0.5, 1, 1, 1]},
]
F32 = np.arange(4, dtype="<f4").tobytes()
BINARY_INPUT1 = {
    "name": "INPUT1",
    "datatype": "FP32",
    "shape": [4],
    "parameters": {"binary_data_size": 16},
}


def _bytes_blob(*items: bytes) -> bytes:
    return b"".join(struct.pack("<I", len(i)) + i for i in items)


def _with(index: int, **changes: Any) -> List[Dict[str, Any]]:
    inputs = [dict(t) for t in ADD_SUB]
    inputs[index].update(changes)
    return inputs


Case = Tuple[str, str, bytes, Dict[str, str]]


def _post(model: str, header: Dict[str, Any], *blobs: bytes) -> Case:
    body, headers = infer_body(header, *blobs)
    return "POST", f"/v2/models/{model}/infer", body, headers


CASES: Dict[str, Case] = {
    "live": ("GET", "/v2/health/live", b"", {}),
    "ready": ("GET", "/v2/health/ready", b"", {}),
    "metadata": ("GET", "/v2/models/add_sub", b"", {}),
    "metadata of a batching model": ("GET", "/v2/models/string_echo", b"", {}),
    "metadata of a version": ("GET", "/v2/models/add_sub/versions/1", b"", {}),
    "metadata of a missing version": ("GET", "/v2/models/add_sub/versions/2", b"", {}),
    "metadata of an unknown model": ("GET", "/v2/models/nope", b"", {}),
    "configuration": ("GET", "/v2/models/add_sub/config", b"", {}),
    "configuration of a batching model": ("GET", "/v2/models/stacked_scale/config", b"", {}),
    "configuration of a decoupled model": ("GET", "/v2/models/token_stream/config", b"", {}),
    "configuration of an unknown model": ("GET", "/v2/models/nope/config", b"", {}),
    "model ready": ("GET", "/v2/models/token_stream/ready", b"", {}),
    "unknown model ready": ("GET", "/v2/models/nope/ready", b"", {}),
    "missing version ready": ("GET", "/v2/models/add_sub/versions/2/ready", b"", {}),
    "repository index": ("POST", "/v2/repository/index", b"", {}),
    "unknown path": ("GET", "/v2/nothing", b"", {}),
    "infer with GET": ("GET", "/v2/models/add_sub/infer", b"", {}),
    "JSON in, JSON out, with an id": _post("add_sub", {"id": "r-1", "inputs": ADD_SUB}),
    "one output of two": _post("add_sub", {"inputs": ADD_SUB, "outputs": [{"name": "OUTPUT1"}]}),
    "binary_data_output": _post(
        "add_sub", {"inputs": ADD_SUB, "parameters": {"binary_data_output": True}}
    ),
    "one output binary, one JSON": _post(
        "add_sub",
        {
            "inputs": ADD_SUB,
            "outputs": [
                {"name": "OUTPUT0", "parameters": {"binary_data": True}},
                {"name": "OUTPUT1"},
            ],
        },
    ),
    "binary input": _post("add_sub", {"inputs": [ADD_SUB[0], BINARY_INPUT1]}, F32),
    "data and binary_data_size both set": _post(
        "add_sub", {"inputs": _with(1, parameters={"binary_data_size": 16})}, F32
    ),
    "binary input too short": _post("add_sub", {"inputs": [ADD_SUB[0], BINARY_INPUT1]}, F32[:12]),
    "binary input with bytes left over": _post(
        "add_sub", {"inputs": [ADD_SUB[0], BINARY_INPUT1]}, F32 + b"\0" * 4
    ),
    "a missing input": _post("add_sub", {"inputs": ADD_SUB[:1]}),
    "an unknown input": _post("add_sub", {"inputs": _with(0, name="X")}),
    "a wrong datatype": _post("add_sub", {"inputs": _with(0, datatype="INT32")}),
    "a wrong shape": _post("add_sub", {"inputs": _with(0, shape=[2, 2], data=[[1, 2], [3, 4]])}),
    "data that does not fill the shape": _post("add_sub", {"inputs": _with(0, shape=[5])}),
    "FP16 as JSON": _post("add_sub", {"inputs": _with(0, datatype="FP16")}),
    "a batch larger than max_batch_size": _post(
        "stacked_scale",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [17, 8], "data": [1] * 136}]},
    ),
    "a batch of max_batch_size": _post(
        "stacked_scale",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [16, 8], "data": [1] * 128}]},
    ),
    "a batch too large, with an id": _post(
        "string_echo",
        {
            "id": "x",
            "inputs": [{"name": "INPUT0", "datatype": "BYTES", "shape": [9, 1], "data": ["a"] * 9}],
        },
    ),
    "an unknown output": _post("add_sub", {"inputs": ADD_SUB, "outputs": [{"name": "NOPE"}]}),
    "an unknown model": _post("nope", {"inputs": ADD_SUB}),
    "inputs not a list": _post("add_sub", {"inputs": "x"}),
    "execute raises": _post(
        "error_model",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [3], "data": [1, 2, 3]}]},
    ),
    "a decoupled model": _post(
        "token_stream",
        {"inputs": [{"name": "PROMPT", "datatype": "BYTES", "shape": [1], "data": ["a b"]}]},
    ),
    "BYTES as JSON, not all UTF-8 on the way back": _post(
        "string_echo",
        {
            "inputs": [
                {"name": "INPUT0", "datatype": "BYTES", "shape": [1, 3], "data": ["a", "bé", ""]}
            ]
        },
    ),
    "BYTES in binary, out in binary": _post(
        "string_echo",
        {
            "inputs": [
                {
                    "name": "INPUT0",
                    "datatype": "BYTES",
                    "shape": [2, 2],
                    "parameters": {"binary_data_size": 30},
                }
            ],
            "parameters": {"binary_data_output": True},
        },
        _bytes_blob(b"ab", b"\x00\xff", b"", b"xyz\x00"),
    ),
    "a BLS pipeline": _post(
        "bls_pipeline",
        {"inputs": [{"name": "INPUT0", "datatype": "FP32", "shape": [4], "data": [1, 2, 3, 4]}]},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_same_answer_as_tritonserver(case: str, devserver: Any, examples_server: Any) -> None:
    method, path, body, headers = CASES[case]
    want = exchange(examples_server.http_url, method, path, body, headers)
    got = exchange(devserver.http_url, method, path, body, headers)
    assert got == want


def test_unparsable_json_is_refused_like_tritonserver(devserver: Any, examples_server: Any) -> None:
    """The parser's own words differ (rapidjson's against Python's); the status and the
    text before them do not."""
    body, headers = b"{not json", {"Content-Type": "application/json"}
    want = exchange(examples_server.http_url, "POST", "/v2/models/add_sub/infer", body, headers)
    got = exchange(devserver.http_url, "POST", "/v2/models/add_sub/infer", body, headers)
    assert got[0] == want[0]
    prefix = "failed to parse the request JSON buffer: "
    assert want[1]["error"].startswith(prefix) and got[1]["error"].startswith(prefix)
