"""Every datatype through the development server and through tritonserver with our
backend, on the conformance suite's identity models: JSON and binary tensors in and out
over HTTP, raw contents over gRPC; the same bodies (values, datatypes, shapes, the binary
bytes) and the same refusals (FP16 and BF16 as JSON)."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Dict, List, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from http_exchange import exchange, infer_body
from side_by_side import copied

from pybackend.devserver import DevServer
from pybackend.server import TritonServer

IO_MODELS = Path(__file__).resolve().parents[1] / "conformance" / "io" / "models"
# Only the models used here: the folder also holds models that need a server option, a
# load order or an environment of their own (the conformance io modules load them one by one).
MODELS = [IO_MODELS / "identity_all", IO_MODELS / "bf16_identity"]

VALUES: Dict[str, np.ndarray] = {
    "BOOL": np.array([[True, False, True], [False, False, True]]),
    "UINT8": np.array([[0, 1, 255], [7, 8, 9]], np.uint8),
    "UINT16": np.array([[0, 1, 65535], [7, 8, 9]], np.uint16),
    "UINT32": np.array([[0, 1, 2**32 - 1], [7, 8, 9]], np.uint32),
    "UINT64": np.array([[0, 1, 2**64 - 1], [7, 8, 9]], np.uint64),
    "INT8": np.array([[-128, 0, 127], [-1, 2, -3]], np.int8),
    "INT16": np.array([[-(2**15), 0, 2**15 - 1], [-1, 2, -3]], np.int16),
    "INT32": np.array([[-(2**31), 0, 2**31 - 1], [-1, 2, -3]], np.int32),
    "INT64": np.array([[-(2**63), 0, 2**63 - 1], [-1, 2, -3]], np.int64),
    "FP16": np.array([[0.5, -2.0, 65504.0], [1e-3, 3.0, -0.0]], np.float16),
    "FP32": np.array([[0.1, -2.5, 3.4e38], [1e-30, 3.0, -0.0]], np.float32),
    "FP64": np.array([[0.1, -2.5, 1.7e308], [1e-300, 3.0, -0.0]], np.float64),
    "STRING": np.array([[b"a", b"", b"\xc3\xa9"], [b"x y", b"0", b"long" * 10]], np.object_),
}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Any, Any]]:
    repo = copied(tmp_path_factory, "datatypes", *MODELS)
    with TritonServer(repo) as real, DevServer(repo, grpc_port=0, echo_logs=False) as dev:
        yield real, dev


def _wire(name: str) -> str:
    return "BYTES" if name == "STRING" else name


def _raw(values: np.ndarray, name: str) -> bytes:
    if name == "STRING":
        return b"".join(struct.pack("<I", len(v)) + v for v in values.reshape(-1))
    return values.astype(values.dtype.newbyteorder("<")).tobytes()


def _json_data(values: np.ndarray, name: str) -> List[Any]:
    if name == "STRING":
        return [v.decode() for v in values.reshape(-1)]
    return values.reshape(-1).tolist()


def _case(name: str, binary_in: bool, binary_out: bool) -> Tuple[bytes, Dict[str, str]]:
    values = VALUES[name]
    tensor: Dict[str, Any] = {"name": f"IN_{name}", "datatype": _wire(name), "shape": [2, 3]}
    blobs = []
    if binary_in:
        blob = _raw(values, name)
        tensor["parameters"] = {"binary_data_size": len(blob)}
        blobs.append(blob)
    else:
        tensor["data"] = _json_data(values, name)
    header = {
        "inputs": [tensor],
        "outputs": [{"name": f"OUT_{name}", "parameters": {"binary_data": binary_out}}],
    }
    return infer_body(header, *blobs)


CASES = {
    f"{name} {'binary' if bin_in else 'JSON'} in, {'binary' if bin_out else 'JSON'} out": (
        name, bin_in, bin_out,
    )
    for name in VALUES
    for bin_in in (False, True)
    for bin_out in (False, True)
}  # fmt: skip


@pytest.mark.parametrize("case", list(CASES))
def test_http_same_as_tritonserver(case: str, servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    body, headers = _case(*CASES[case])
    path = "/v2/models/identity_all/infer"
    assert exchange(dev.http_url, "POST", path, body, headers) == exchange(
        real.http_url, "POST", path, body, headers
    )


@pytest.mark.parametrize("name", list(VALUES))
def test_grpc_same_as_tritonserver(name: str, servers: Tuple[Any, Any]) -> None:
    def run(url: str) -> Tuple[str, List[int], Any]:
        client = grpcclient.InferenceServerClient(url)
        try:
            tensor = grpcclient.InferInput(f"IN_{name}", [2, 3], _wire(name))
            tensor.set_data_from_numpy(VALUES[name])
            result = client.infer("identity_all", [tensor])
            out = result.get_output(f"OUT_{name}")
            return out.datatype, list(out.shape), result.as_numpy(f"OUT_{name}").tolist()
        finally:
            client.close()

    real, dev = servers
    assert run(dev.grpc_url) == run(real.grpc_url)


def test_bf16_binary_in_and_out_same_as_tritonserver(servers: Tuple[Any, Any]) -> None:
    pytest.importorskip("ml_dtypes", reason="BF16 arrays need ml_dtypes (in .venv)")
    real, dev = servers
    bits = np.array([0x3F80, 0xC000, 0x7F7F], dtype="<u2").tobytes()  # 1.0, -2.0, max
    tensor = {"name": "IN", "datatype": "BF16", "shape": [3]}
    header = {"inputs": [dict(tensor, parameters={"binary_data_size": 6})]}
    header["outputs"] = [{"name": "OUT", "parameters": {"binary_data": True}}]
    body, headers = infer_body(header, bits)
    path = "/v2/models/bf16_identity/infer"
    got = exchange(dev.http_url, "POST", path, body, headers)
    assert got == exchange(real.http_url, "POST", path, body, headers)
    assert got[1][1] == bits
