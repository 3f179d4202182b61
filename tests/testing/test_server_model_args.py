"""``ServerModel(server_args=[...])``: tritonserver options for what only a server does, here
header forwarding into ``request.parameters()`` and OpenTelemetry trace contexts
(``request.trace().get_context()``), with ``infer(..., headers=...)``."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
from model_dirs import write_model

from pybackend.testing import ModelHarness, ServerModel

BODY = """
import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            seen = {"parameters": json.loads(r.parameters()), "context": r.trace().get_context()}
            text = np.array([json.dumps(seen).encode()], np.object_)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]))
        return out
"""
CONFIG = """
name: "seen_by_server"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] } ]
"""
TRACE = "0af7651916cd43dd8448eb211c80319c"
ARGS = [
    "--http-header-forward-pattern=x-tenant",
    "--trace-config=mode=opentelemetry",
    "--trace-config=rate=1",
    "--trace-config=level=TIMESTAMPS",
    "--trace-config=opentelemetry,url=127.0.0.1:9/v1/traces",  # a closed port: spans lost
]


def _seen(model, headers=None) -> dict:
    # A copy: tritonclient's HTTP client adds entries of its own to the dict it is given.
    kwargs = {"headers": dict(headers)} if headers else {}
    out = model.infer({"X": np.ones(1, np.float32)}, **kwargs)
    return json.loads(out["SEEN"][0])


def test_server_args_reach_the_server(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "seen_by_server", BODY, CONFIG)
    headers = {
        "x-tenant": "blue",
        "x-other": "no",
        "traceparent": f"00-{TRACE}-b7ad6b7169203331-01",
    }
    with ServerModel(model_dir, server_args=ARGS) as model:
        seen = _seen(model, headers=headers)
    assert seen["parameters"] == {"x-tenant": "blue"}  # only what the pattern forwards
    assert re.fullmatch(r'\{"traceparent":"00-' + TRACE + r'-[0-9a-f]{16}-01"\}', seen["context"])
    with ServerModel(model_dir) as model:  # without them: neither
        assert _seen(model, headers=headers) == {"parameters": {}, "context": None}
    with ModelHarness(model_dir) as model:  # as offline, where there is no server
        assert _seen(model) == {"parameters": {}, "context": None}
