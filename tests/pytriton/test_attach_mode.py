"""Attach mode from the server's side (model parameter PYBACKEND_ATTACH_SOCKET): a model
whose process is not listening fails its load with an error that says so."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybackend.server import TritonServer

CONFIG = """
name: "attached"
backend: "python"
max_batch_size: 0
input [ { name: "x", data_type: TYPE_FP32, dims: [ -1 ] } ]
output [ { name: "y", data_type: TYPE_FP32, dims: [ -1 ] } ]
instance_group [ { count: 1, kind: KIND_CPU } ]
parameters { key: "PYBACKEND_ATTACH_SOCKET" value: { string_value: "%s" } }
"""


def test_nobody_listening_fails_the_load_clearly(tmp_path: Path) -> None:
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    repo = tmp_path / "repo"
    (repo / "attached" / "1").mkdir(parents=True)
    socket_path = tmp_path / "nobody.sock"
    (repo / "attached" / "config.pbtxt").write_text(CONFIG % socket_path)
    with TritonServer(repo, model_control_mode="explicit") as server:
        client = httpclient.InferenceServerClient(server.http_url)
        with pytest.raises(InferenceServerException) as info:
            client.load_model("attached")
        client.close()
    text = str(info.value)
    who = "model 'attached' instance 'attached_0_0'"
    assert f"cannot attach {who} to the process serving it at '{socket_path}'" in text
    assert "connect: No such file or directory" in text and "Triton.bind" in text
