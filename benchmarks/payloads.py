"""Requests for the load generator, in KServe v2 HTTP with the binary tensor extension.

Each payload renders one raw HTTP/1.1 request (the C load generator replays it over
keep-alive connections) and knows the exact output bytes a correct server returns, so
every backend is checked once before it is timed.
"""

from __future__ import annotations

import http.client
import json
import struct
from dataclasses import dataclass, field

import numpy as np

_DTYPES = {"FP32": np.float32, "INT32": np.int32, "INT64": np.int64}


@dataclass(frozen=True)
class Tensor:
    name: str
    datatype: str
    shape: tuple[int, ...]
    data: bytes


def fp32(name: str, shape: tuple[int, ...], seed: int = 0) -> Tensor:
    values = np.random.default_rng(seed).standard_normal(int(np.prod(shape)), dtype=np.float32)
    return Tensor(name, "FP32", shape, values.tobytes())


def serialize_strings(strings: list[bytes]) -> bytes:
    """Triton's BYTES wire form: per element a little-endian u32 length, then the bytes."""
    return b"".join(struct.pack("<I", len(s)) + s for s in strings)


def strings(name: str, count: int, width: int) -> Tensor:
    items = [(f"s{i:06d}-".encode() * width)[:width] for i in range(count)]
    return Tensor(name, "BYTES", (count,), serialize_strings(items))


def _raw_request(path: str, headers: dict[str, str], body: bytes) -> bytes:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    head += f"Content-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


@dataclass(frozen=True)
class InferPayload:
    """A /infer request and the outputs (name -> exact bytes) a correct answer carries."""

    model: str
    inputs: tuple[Tensor, ...]
    expected: dict[str, bytes] = field(hash=False)
    sse = False

    @property
    def path(self) -> str:
        return f"/v2/models/{self.model}/infer"

    def parts(self) -> tuple[str, dict[str, str], bytes]:
        header = {
            "inputs": [
                {
                    "name": t.name,
                    "shape": list(t.shape),
                    "datatype": t.datatype,
                    "parameters": {"binary_data_size": len(t.data)},
                }
                for t in self.inputs
            ],
            "outputs": [{"name": n, "parameters": {"binary_data": True}} for n in self.expected],
        }
        head = json.dumps(header, separators=(",", ":")).encode()
        headers = {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(head)),
        }
        return self.path, headers, head + b"".join(t.data for t in self.inputs)

    def raw(self) -> bytes:
        return _raw_request(*self.parts())

    def check(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> str | None:
        """None if the response is right, else a one-line reason."""
        if status != 200:
            return f"HTTP {status}: {body[:300].decode(errors='replace')}"
        head_len = int(headers.get("Inference-Header-Content-Length", len(body)))
        outputs = json.loads(body[:head_len])["outputs"]
        offset = head_len
        got = {}
        for out in outputs:
            size = out.get("parameters", {}).get("binary_data_size", 0)
            got[out["name"]] = body[offset : offset + size]
            offset += size
        for name, want in self.expected.items():
            if got.get(name) != want:
                return f"output {name} differs from the expected {len(want)} bytes"
        return None


@dataclass(frozen=True)
class StreamPayload:
    """A /generate_stream request to a decoupled model; expects `events` SSE events."""

    model: str
    body: dict[str, int]
    events: int
    sse = True

    def parts(self) -> tuple[str, dict[str, str], bytes]:
        body = json.dumps(self.body).encode()
        headers = {"Content-Type": "application/json"}
        return f"/v2/models/{self.model}/generate_stream", headers, body

    def raw(self) -> bytes:
        return _raw_request(*self.parts())

    def check(self, status: int, headers: http.client.HTTPMessage, body: bytes) -> str | None:
        if status != 200:
            return f"HTTP {status}: {body[:300].decode(errors='replace')}"
        if b'"error"' in body:
            start = body.index(b'"error"')
            return body[start : start + 300].decode(errors="replace")
        count = body.count(b"\n\n")
        return None if count == self.events else f"{count} events, expected {self.events}"


Payload = InferPayload | StreamPayload


def identity(model: str, shape: tuple[int, ...]) -> InferPayload:
    t = fp32("INPUT0", shape)
    return InferPayload(model, (t,), {"OUTPUT0": t.data})


def add_sub(model: str) -> InferPayload:
    a, b = fp32("INPUT0", (4,), 1), fp32("INPUT1", (4,), 2)
    va, vb = np.frombuffer(a.data, np.float32), np.frombuffer(b.data, np.float32)
    expected = {"OUTPUT0": (va + vb).tobytes(), "OUTPUT1": (va - vb).tobytes()}
    return InferPayload(model, (a, b), expected)


def bytes_echo(model: str, count: int, width: int) -> InferPayload:
    t = strings("INPUT0", count, width)
    return InferPayload(model, (t,), {"OUTPUT0": t.data})


def bytes_decode(model: str, count: int, width: int) -> InferPayload:
    t = strings("INPUT0", count, width)
    return InferPayload(model, (t,), {"OUTPUT0": np.array([count], np.int64).tobytes()})


def stream(model: str, responses: int) -> StreamPayload:
    return StreamPayload(model, {"INPUT0": responses}, responses)


def send_once(port: int, payload: Payload, timeout: float = 120.0) -> str | None:
    """Send the payload once with a plain client; None if the answer is right."""
    path, headers, body = payload.parts()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("POST", path, body=body, headers=headers)
        resp = conn.getresponse()
        return payload.check(resp.status, resp.headers, resp.read())
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
