"""RemoteTriton: bind into a tritonserver that already runs with our backend (explicit model
control, as `pybackend serve` can run it); the instances attach to this process."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pybackend.pytriton.client import ModelClient
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import RemoteTriton
from pybackend.server import TritonServer


def test_remote_triton_binds_into_a_running_server(tmp_path: Path) -> None:
    import tritonclient.http as httpclient

    (tmp_path / "repo").mkdir()
    with TritonServer(tmp_path / "repo", model_control_mode="explicit") as server:
        url = f"http://{server.http_url}"
        with RemoteTriton(url=url) as remote:
            remote.bind(
                "Remote",
                lambda requests: [{"y": r["x"] + 1} for r in requests],
                inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
                outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
                config=ModelConfig(max_batch_size=4),
            )
            with ModelClient(url, "Remote") as client:
                y = client.infer_sample(np.zeros(3, np.float32))["y"]
        # stop() unloaded the model; the server itself goes on.
        client = httpclient.InferenceServerClient(server.http_url)
        assert not client.is_model_ready("Remote")
        assert client.is_server_live()
        client.close()
    np.testing.assert_array_equal(y, np.ones(3, np.float32))
