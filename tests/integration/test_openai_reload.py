"""The OpenAI endpoint keeps a model's configuration (pybackend/openai_api/config_cache.py)
and still serves the request that comes right after a reload changed it: the kept
configuration fails in tritonserver, the endpoint reads it afresh, sees the change and runs
the request again with the new one. A model unloaded meanwhile is the 404 it was before the
cache. Through a real tritonserver in explicit mode, with both backends."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

openai = pytest.importorskip("openai")
httpclient = pytest.importorskip("tritonclient.http")

from pybackend.openai_api import OpenAIServer  # noqa: E402
from pybackend.server import TritonServer  # noqa: E402

MODEL = "reloaded_llm"
# Answers "<version> <what it got>: <prompt>"; its version is a parameter of the config.
MODEL_PY = textwrap.dedent(
    """
    import json

    import numpy as np
    import triton_python_backend_utils as pb_utils


    class TritonPythonModel:
        def initialize(self, args):
            config = json.loads(args["model_config"])
            self.version = config["parameters"]["VERSION"]["string_value"]
            self.decoupled = config.get("model_transaction_policy", {}).get("decoupled")

        def execute(self, requests):
            responses = []
            for request in requests:
                got = sorted(i.name() for i in request.inputs())
                prompt = pb_utils.get_input_tensor_by_name(request, "text_input")
                text = f"{self.version} {','.join(got)}: {prompt.as_numpy().ravel()[0].decode()}"
                out = pb_utils.Tensor("text_output", np.array([text.encode()], np.object_))
                response = pb_utils.InferenceResponse([out])
                if self.decoupled:
                    sender = request.get_response_sender()
                    sender.send(response)
                    sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                else:
                    responses.append(response)
            return None if self.decoupled else responses
    """
)
TEXT_INPUT = '{ name: "text_input" data_type: TYPE_STRING dims: [ 1 ] }'
STREAM_INPUT = '{ name: "stream" data_type: TYPE_BOOL dims: [ 1 ] }'  # required
VERSIONS: Dict[str, str] = {
    "v1": f"input [ {TEXT_INPUT} ]",
    # A required input the kept v1 configuration does not send: tritonserver refuses.
    "v2": f"input [ {TEXT_INPUT}, {STREAM_INPUT} ]",
    # Decoupled: the kept v1 configuration asks with a plain infer, which it refuses.
    "v3": f"input [ {TEXT_INPUT} ]\nmodel_transaction_policy {{ decoupled: true }}",
}


def write_model(repository: Path, version: str) -> None:
    directory = repository / MODEL
    (directory / "1").mkdir(parents=True, exist_ok=True)
    (directory / "1" / "model.py").write_text(MODEL_PY)
    (directory / "config.pbtxt").write_text(
        textwrap.dedent(
            f"""
            backend: "python"
            max_batch_size: 0
            {VERSIONS[version]}
            output [ {{ name: "text_output" data_type: TYPE_STRING dims: [ -1 ] }} ]
            parameters {{ key: "VERSION" value: {{ string_value: "{version}" }} }}
            instance_group [ {{ count: 1 kind: KIND_CPU }} ]
            """
        )
    )


@pytest.fixture()
def served(tmp_path: Path, backend_kind: str) -> Iterator[Any]:
    """(repository, tritonserver's HTTP client, the endpoint's SDK client), v1 loaded and
    its configuration kept by the endpoint (60 s: only a failure reads it again)."""
    write_model(tmp_path, "v1")
    with TritonServer(
        tmp_path, backend=backend_kind, model_control_mode="explicit", load_models=[MODEL]
    ) as triton:
        control = httpclient.InferenceServerClient(triton.http_url)
        with OpenAIServer(triton.grpc_url, timeout=30, config_ttl=60) as endpoint:
            sdk = openai.OpenAI(base_url=endpoint.url, api_key="unused", max_retries=0)
            try:
                first = sdk.completions.create(model=MODEL, prompt="hello")
                assert first.choices[0].text == "v1 text_input: hello"
                yield tmp_path, control, sdk
            finally:
                sdk.close()
                control.close()


@pytest.mark.parametrize(
    ("version", "answer"),
    [("v2", "v2 stream,text_input: again"), ("v3", "v3 text_input: again")],
    ids=["a-required-input-added", "made-decoupled"],
)
def test_the_request_right_after_a_reload_is_served_with_the_new_configuration(
    served: Any, version: str, answer: str
) -> None:
    repository, control, sdk = served
    write_model(repository, version)
    control.load_model(MODEL)  # a reload: the endpoint still keeps v1's configuration
    assert sdk.completions.create(model=MODEL, prompt="again").choices[0].text == answer
    pieces = sdk.completions.create(model=MODEL, prompt="again", stream=True)
    assert "".join(c.choices[0].text for c in pieces) == answer


def test_a_model_unloaded_since_its_configuration_was_kept_is_not_found(served: Any) -> None:
    _, control, sdk = served
    control.unload_model(MODEL, unload_dependents=False)
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.completions.create(model=MODEL, prompt="gone")
    assert caught.value.body["code"] == "model_not_found"
    assert f"The model `{MODEL}` does not exist or is not ready" in caught.value.body["message"]
