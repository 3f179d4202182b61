"""Malformed requests from clients: BYTES payloads whose length prefixes lie (fuzzed with
hypothesis) and declared sizes that do not match the data. Each gets an answer (the right
output, or an error naming the input) and the instance stays healthy."""

from __future__ import annotations

import http.client
import json
import struct
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reliability_support import start, stubs


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(["soak_bytes", "soak_default"]) as s:
        yield s


def _post(server: Any, model: str, inputs: list[dict], payload: bytes) -> tuple[int, Any]:
    """A raw binary-extension infer request; returns (status, parsed answer)."""
    header = json.dumps(
        {"inputs": inputs, "outputs": [{"name": "OUT", "parameters": {"binary_data": True}}]}
    ).encode()
    host, port = server.http_url.split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request(
            "POST",
            f"/v2/models/{model}/infer",
            body=header + payload,
            headers={
                "Inference-Header-Content-Length": str(len(header)),
                "Content-Type": "application/octet-stream",
            },
        )
        resp = conn.getresponse()
        body = resp.read()
        length = resp.getheader("Inference-Header-Content-Length")
        if length is None:
            return resp.status, json.loads(body or b"{}")
        return resp.status, (json.loads(body[: int(length)]), body[int(length) :])
    finally:
        conn.close()


def _parse(payload: bytes, count: int) -> list[bytes] | None:
    """The elements of a serialized BYTES tensor, or None when it is malformed."""
    out, offset = [], 0
    for _ in range(count):
        if len(payload) - offset < 4:
            return None
        (n,) = struct.unpack_from("<I", payload, offset)
        offset += 4
        if n > len(payload) - offset:
            return None
        out.append(payload[offset : offset + n])
        offset += n
    return out if offset == len(payload) else None


def _serialize(items: list[bytes]) -> bytes:
    return b"".join(struct.pack("<I", len(i)) + i for i in items)


_items = st.lists(st.binary(max_size=12), min_size=1, max_size=6)
_payloads = st.one_of(
    st.binary(max_size=48),  # noise
    _items.map(_serialize),  # well formed
    st.tuples(_items.map(_serialize), st.integers(1, 8)).map(lambda p: p[0][: -p[1]]),  # cut
    st.tuples(_items.map(_serialize), st.binary(min_size=1, max_size=5)).map(
        lambda p: p[0] + p[1]  # trailing bytes
    ),
    st.tuples(_items, st.integers(0, 2**32 - 1)).map(  # a lying first length prefix
        lambda p: struct.pack("<I", p[1]) + _serialize(p[0])[4:]
    ),
)


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(count=st.integers(1, 6), payload=_payloads)
def test_fuzzed_bytes_payloads_get_an_answer(server: Any, count: int, payload: bytes) -> None:
    before = stubs(server, "soak_bytes")
    inputs = [
        {
            "name": "IN",
            "shape": [count],
            "datatype": "BYTES",
            "parameters": {"binary_data_size": len(payload)},
        }
    ]
    status, answer = _post(server, "soak_bytes", inputs, payload)
    items = _parse(payload, count)
    if items is None:
        assert status == 400, (status, answer)
        assert "'IN'" in answer["error"], answer
    else:
        assert status == 200, (status, answer)
        head, data = answer
        assert head["outputs"][0]["shape"] == [count]
        assert _parse(data, count) == [i[::-1] for i in items]
    assert stubs(server, "soak_bytes") == before


@pytest.mark.parametrize(
    "model, inp, payload",
    [
        ("soak_default", {"name": "IN", "shape": [1 << 40], "datatype": "FP32"}, b"\0" * 16),
        ("soak_default", {"name": "IN", "shape": [4], "datatype": "FP32"}, b"\0" * 15),
        ("soak_default", {"name": "IN", "shape": [-5], "datatype": "FP32"}, b"\0" * 16),
        ("soak_bytes", {"name": "IN", "shape": [1 << 30], "datatype": "BYTES"}, b"\1\0\0\0a"),
        ("soak_bytes", {"name": "IN", "shape": [2], "datatype": "FP32"}, b"\0" * 8),
    ],
)
def test_declared_sizes_that_lie_are_refused(
    server: Any, model: str, inp: dict, payload: bytes
) -> None:
    before = stubs(server)
    inp = dict(inp, parameters={"binary_data_size": len(payload)})
    status, answer = _post(server, model, [inp], payload)
    # Most are refused by Triton's frontend before they reach a backend (with 400, or 500
    # for a negative dimension); ours refuses the rest.
    assert status in (400, 500), (status, answer)
    assert answer["error"]
    assert stubs(server) == before
    good = {"name": "IN", "shape": [1], "datatype": "BYTES", "parameters": {"binary_data_size": 5}}
    status, (_, data) = _post(server, "soak_bytes", [good], b"\1\0\0\0a")
    assert status == 200 and data == b"\1\0\0\0a"
