"""An error response with each Triton error code reaches an HTTP and a gRPC client of the
development server with the status tritonserver 2.51 gives it (UNKNOWN, ALREADY_EXISTS and
CANCELLED are 400 on HTTP, not what their names suggest)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Tuple

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from http_exchange import exchange
from side_by_side import MODES, copied, side_by_side
from tritonclient.utils import InferenceServerException

RETURN_RULES = (
    Path(__file__).resolve().parents[1]
    / "conformance"
    / "execute_semantics"
    / "models"
    / "return_rules"
)
CODES = [
    "UNKNOWN",
    "INTERNAL",
    "NOT_FOUND",
    "INVALID_ARG",
    "UNAVAILABLE",
    "UNSUPPORTED",
    "ALREADY_EXISTS",
    "CANCELLED",
]


@pytest.fixture(scope="module", params=MODES)
def servers(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Tuple[Any, Any]]:
    with side_by_side(copied(tmp_path_factory, "codes", RETURN_RULES), request.param) as pair:
        yield pair


def _http(server: Any, mode: str) -> Tuple[int, Any]:
    body = {"inputs": [{"name": "MODE", "datatype": "BYTES", "shape": [1], "data": [mode]}]}
    return exchange(
        server.http_url, "POST", "/v2/models/return_rules/infer", json.dumps(body).encode()
    )


def _grpc(server: Any, mode: str) -> Tuple[str, str]:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        tensor = grpcclient.InferInput("MODE", [1], "BYTES")
        tensor.set_data_from_numpy(np.array([mode.encode()], dtype=object))
        with pytest.raises(InferenceServerException) as caught:
            client.infer("return_rules", [tensor])
        return str(caught.value.status()), caught.value.message()
    finally:
        client.close()


@pytest.mark.parametrize("code", CODES)
def test_error_code_status_alike(code: str, servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    mode = f"error_code_{code}"
    want = _http(real, mode)
    assert want[1] == {"error": f"failed with {code}"}
    assert _http(dev, mode) == want
    assert _grpc(dev, mode) == _grpc(real, mode)
