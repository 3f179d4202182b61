"""The offline harness (pybackend.testing): the example models in-process with the real
pb_utils types, and the very same checks through a real tritonserver with our backend
and in a real stub process (the ``triton_model`` fixture, parametrized over the three modes
here)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_dirs import how, write_model

from pybackend.testing import (
    InferError,
    ModelHarness,
    StubModel,
    load_config,
)
from pybackend.utils.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2] / "examples" / "model_repository"
BOTH = pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])


@BOTH
def test_add_sub(triton_model: Any) -> None:
    model = triton_model(REPO / "add_sub")
    a, b = np.array([1, 2, 3, 4], np.float32), np.array([4, 3, 2, 1], np.float32)
    out = model.infer({"INPUT0": a, "INPUT1": b})
    assert out["OUTPUT0"].tolist() == [5, 5, 5, 5]
    assert out["OUTPUT1"].tolist() == [-3, -1, 1, 3]
    only = model.infer({"INPUT0": a, "INPUT1": b}, requested_outputs=["OUTPUT1"])
    assert list(only) == ["OUTPUT1"]


@BOTH
def test_bytes_round_trip(triton_model: Any) -> None:
    model = triton_model(REPO / "string_echo")
    words = np.array([[b"", b"a\x00b", "ü".encode(), b"\xff\xfe"]], np.object_)  # batch of 1
    out = model.infer({"INPUT0": words})
    assert out["OUTPUT0"].tolist() == words.tolist()
    assert out["OUTPUT0"].dtype == np.object_
    # numpy text (dtype "<U") goes as UTF-8 BYTES, as tritonclient sends it.
    out = model.infer({"INPUT0": np.array([["ü", "a"]])})
    assert out["OUTPUT0"].tolist() == [["ü".encode(), b"a"]]


@BOTH
def test_an_exception_in_execute_is_the_clients_error(triton_model: Any) -> None:
    model = triton_model(REPO / "error_model")
    with pytest.raises(InferError) as info:
        model.infer({"INPUT0": np.zeros(3, np.float32)})
    text = info.value.message
    assert "Failed to process the request(s) for model 'error_model_0" in text, text
    assert "ValueError: error_model refuses every request (first one had 3 values)" in text
    assert "error_model/1/model.py(" in text, text  # the traceback names model.py


@BOTH
def test_decoupled_stream(triton_model: Any) -> None:
    model = triton_model(REPO / "token_stream")
    prompt = np.array([b"the quick brown fox"], np.object_)
    got = model.infer_stream({"PROMPT": prompt, "MAX_TOKENS": np.array([3], np.int32)})
    # the prompt's words reversed and capitalised, at most MAX_TOKENS of them
    assert [r["TOKEN"].tolist() for r in got] == [[b"Fox"], [b"Brown"], [b"Quick"]]
    assert [int(r["INDEX"][0]) for r in got] == [0, 1, 2]


@BOTH
def test_bls_pipeline_with_its_callees(triton_model: Any) -> None:
    callees = [REPO / n for n in ("bls_preprocess", "add_sub", "bls_postprocess")]
    model = triton_model(REPO / "bls_pipeline", others=callees)
    out = model.infer(
        {
            "TEXT": np.array([b"hello world"], np.object_),
            "WEIGHTS": np.array([0, 0, 0, 0], np.float32),
        }
    )
    assert out["LABEL"].tolist() == [b"letters"]
    assert out["SCORES"].tolist() == [10, 0, 1, 0]


def test_bls_fake_and_a_missing_callee() -> None:
    import triton_python_backend_utils as pb_utils

    seen = []

    def fake_add_sub(request: Any) -> Any:
        seen.append(request.model_name())
        x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        return pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x * 0)])

    callees = {"add_sub": fake_add_sub}
    with ModelHarness(REPO / "bls_preprocess"), ModelHarness(REPO / "bls_postprocess"):
        with ModelHarness(REPO / "bls_pipeline", bls=callees) as model:
            text = np.array([b"hello world"], np.object_)
            out = model.infer({"TEXT": text, "WEIGHTS": np.zeros(4, np.float32)})
            assert seen == ["add_sub"]
            assert out["SCORES"].tolist() == [0, 0, 0, 0]
    # Without its callees the pipeline answers with the BLS error, as under the server.
    with ModelHarness(REPO / "bls_pipeline") as model:
        with pytest.raises(InferError) as info:
            model.infer({"TEXT": text, "WEIGHTS": np.zeros(4, np.float32)})
        assert "Model 'bls_preprocess' is not ready." in info.value.message


@BOTH
def test_requests_the_server_refuses(triton_model: Any) -> None:
    add_sub = triton_model(REPO / "add_sub")
    a = np.ones(4, np.float32)
    cases = [
        ({"INPUT0": a}, "missing required input(s) ['INPUT1']"),
        ({"INPUT0": a, "INPUT1": a.astype(np.float64)}, "data-type is 'FP64'"),
        ({"INPUT0": a, "INPUT1": np.ones(5, np.float32)}, "Expected [4], got [5]"),
        ({"INPUT0": a, "INPUT1": a, "EXTRA": a}, "expected 2 inputs but got 3 inputs"),
        ({"INPUT0": a, "INPUT1": a, "EXTRA": a}, "missing required input(s) ]. Please"),
        ({}, "Got input(s) [], but missing required input(s) ['INPUT0','INPUT1']"),
    ]
    for inputs, text in cases:
        with pytest.raises(InferError) as info:
            add_sub.infer(inputs)
        assert text in info.value.message, info.value.message
        assert info.value.code == ErrorCode.INVALID_ARG  # as the client reads the status
    echo = triton_model(REPO / "string_echo")  # max_batch_size 8: a batch dimension first
    with pytest.raises(InferError) as info:
        echo.infer({"INPUT0": np.array([b"a"], np.object_)})
    assert "Expected [-1,-1], got [1]" in info.value.message


def test_config_is_read_with_tritons_schema() -> None:
    config = load_config(REPO / "add_sub")
    first = config["input"][0]
    assert {k: first[k] for k in ("name", "data_type", "dims")} == {
        "name": "INPUT0",
        "data_type": "TYPE_FP32",
        "dims": [4],  # a number, as Triton writes it (protobuf's JSON writes int64 as "4")
    }
    assert first["optional"] is False  # scalar fields with their defaults, as Triton has them
    assert config["backend"] == "python"
    with ModelHarness(REPO / "add_sub") as model:
        args = model.initialize_args()
    assert set(args) == {
        "model_config",
        "model_instance_kind",
        "model_instance_name",
        "model_instance_device_id",
        "model_repository",
        "model_version",
        "model_name",
    }
    assert json.loads(args["model_config"])["name"] == "add_sub"
    assert args["model_instance_name"] == "add_sub_0_0" and args["model_version"] == "1"


WRONG_COUNT = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info("ready: " + args["model_name"])

    def execute(self, requests):
        return []
"""


#: One FP32 input X and output Y of any length.
X_TO_Y = """backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
"""


def test_refused_return_values_get_the_backends_texts(tmp_path: Path) -> None:
    with ModelHarness(write_model(tmp_path, "wrong_count", WRONG_COUNT, X_TO_Y)) as model:
        (resp,) = model.execute([{"X": np.ones(1, np.float32)}])
        assert resp.has_error()
        assert resp.error().code() == ErrorCode.INTERNAL
        assert (
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            "objects. InferenceRequest(s) size is:1, and InferenceResponse(s) size is:0"
        ) in resp.error().message()
        assert [r.message for r in model.logs] == ["ready: wrong_count"]


ASYNC_AND_RELATIVE = """
from . import helper
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        return [
            pb_utils.InferenceResponse([pb_utils.Tensor("Y", helper.double(
                pb_utils.get_input_tensor_by_name(r, "X").as_numpy()))])
            for r in requests
        ]
"""


def test_async_execute_and_relative_imports(tmp_path: Path) -> None:
    model_dir = write_model(tmp_path, "asyncm", ASYNC_AND_RELATIVE, X_TO_Y)
    (model_dir / "1" / "helper.py").write_text("def double(x):\n    return x * 2\n")
    # A second model whose version directory is also "1": modules stay apart.
    other = write_model(tmp_path, "other", WRONG_COUNT)
    with ModelHarness(model_dir) as model, ModelHarness(other):
        responses = model.execute(
            [{"X": np.array([1.5], np.float32)}, {"X": np.ones(2, np.float32)}]
        )
        assert responses[0].output_tensors()[0].as_numpy().tolist() == [3.0]
        assert responses[1].output_tensors()[0].as_numpy().tolist() == [2.0, 2.0]


CONFIG_DUMP = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.text = json.dumps({k: args[k] for k in ("model_config", "model_instance_kind")})

    def execute(self, requests):
        out = np.array([self.text.encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""

DUMP_IO = """name: "dump"
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [ { name: "OUT" data_type: TYPE_STRING dims: [ 1 ] } ]
parameters { key: "K" value: { string_value: "v" } }
"""


@pytest.mark.parametrize(
    "extra",
    [
        "",
        'instance_group [ { count: 2 kind: KIND_CPU }, { name: "g" } ]',
        "dynamic_batching { max_queue_delay_microseconds: 100 }",
        # The kind is args' "MODEL" (was "CPU" offline); the optimization's other parts
        # keep their defaults beside the one set (were left out offline).
        "instance_group [ { kind: KIND_MODEL } ]",
        "optimization { priority: PRIORITY_MAX }",
    ],
)
def test_the_config_a_model_sees_is_the_servers(tmp_path: Path, extra: str) -> None:
    """args["model_config"] under the harness (and in a stub process) equals what
    tritonserver 2.51 hands the model: its defaults (version policy, optimization, instance
    groups...) filled in."""
    from pybackend.testing import ServerModel

    model_dir = write_model(tmp_path, "dump", CONFIG_DUMP, DUMP_IO + extra)
    x = {"X": np.ones(2, np.float32)}
    with ServerModel(model_dir) as server:
        served = json.loads(server.infer(x)["OUT"][0])
    with ModelHarness(model_dir) as model:
        local = json.loads(model.infer(x)["OUT"][0])
    with StubModel(model_dir) as stub:
        stubbed = json.loads(stub.infer(x)["OUT"][0])
    kind = "MODEL" if "KIND_MODEL" in extra else "CPU"
    assert local["model_instance_kind"] == served["model_instance_kind"] == kind
    assert stubbed["model_instance_kind"] == kind
    assert json.loads(local["model_config"]) == json.loads(served["model_config"])
    assert json.loads(stubbed["model_config"]) == json.loads(served["model_config"])


METRICS_AND_LOGS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily(  # kept: a deleted family ends its metrics
            name="requests_seen", description="requests", kind=pb_utils.MetricFamily.COUNTER)
        self.counter = self.family.Metric(labels={"model": args["model_name"]})

    def execute(self, requests):
        self.counter.increment(len(requests))
        pb_utils.Logger.log_warn(f"batch of {len(requests)}")
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""


def test_metrics_and_logs_are_captured(tmp_path: Path) -> None:
    from pybackend.testing import harness_transport

    with ModelHarness(write_model(tmp_path, "counted", METRICS_AND_LOGS)) as model:
        model.execute([{}, {}])
        model.execute([{}])
        (metric,) = [m for m in harness_transport().metrics.values() if m.family == "requests_seen"]
        assert metric.labels == {"model": "counted"} and metric.value == 3
        assert [(r.level, r.message) for r in model.logs] == [(1, "batch of 2"), (1, "batch of 1")]


CYCLIC_METRICS = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        kind = pb_utils.MetricFamily.COUNTER
        self.family = pb_utils.MetricFamily(name="cyclic_total", description="x", kind=kind)
        self.me = self  # a reference cycle: only the collector would free the family
"""


def test_closing_removes_the_models_metric_families(tmp_path: Path) -> None:
    """As unloading in the server does, even where the model's MetricFamily outlives it."""
    import gc

    from pybackend.testing import harness_transport

    def names() -> list:
        return [family[0] for family in harness_transport().families.values()]

    gc.disable()
    try:
        with ModelHarness(write_model(tmp_path, "cyclic", CYCLIC_METRICS)):
            assert "cyclic_total" in names()
        assert "cyclic_total" not in names()
    finally:
        gc.enable()


def test_plain_pb_utils_is_back_after_the_last_harness() -> None:
    """Outside a harness pb_utils behaves as after a plain import (BLS is unsupported)."""
    from pybackend.utils import transport

    before = transport.get_transport()
    with ModelHarness(REPO / "add_sub"):
        assert transport.get_transport() is not before
    assert transport.get_transport() is before


@BOTH
def test_a_client_cancel_stops_the_stream(triton_model: Any) -> None:
    """token_stream checks is_cancelled() before each token and ends with CANCELLED."""
    model = triton_model(REPO / "token_stream")
    prompt = np.array([b"one two three four five six seven eight"], np.object_)
    got = model.infer_stream({"PROMPT": prompt}, cancel_after=2)
    assert [r["TOKEN"].tolist() for r in got] == [[b"Eight"], [b"Seven"]]
    # The model is still there for the next client.
    again = model.infer_stream({"PROMPT": prompt, "MAX_TOKENS": np.array([1], np.int32)})
    assert [r["TOKEN"].tolist() for r in again] == [[b"Eight"]]


IGNORES_CANCEL = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            seen = []
            for i in range(5):
                seen.append(sender.is_cancelled())
                out = np.array([i, int(seen[-1])], np.int32)
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
"""

DECOUPLED_IO = """name: "{name}"
backend: "python"
model_transaction_policy {{ decoupled: true }}
output [ {{ name: "OUT" data_type: TYPE_INT32 dims: [ 2 ] }} ]
"""


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_model_that_ignores_the_cancel_is_seen_doing_so(tmp_path: Path, kind: Any) -> None:
    """Offline, every response until FINAL comes back: a test sees that the model went on
    after the cancel, and is_cancelled() turned true right after the n-th send."""
    name = "ignores"
    model_dir = write_model(tmp_path, name, IGNORES_CANCEL, DECOUPLED_IO.format(name=name))
    with kind(model_dir) as model:
        got = model.infer_stream({}, cancel_after=2)
        assert [r["OUT"].tolist() for r in got] == [[0, 0], [1, 0], [2, 1], [3, 1], [4, 1]]
        got = model.infer_stream({}, cancel_after=0)
        assert [r["OUT"].tolist()[1] for r in got] == [1, 1, 1, 1, 1]
        got = model.infer_stream({})  # a new request: not cancelled
        assert [r["OUT"].tolist()[1] for r in got] == [0, 0, 0, 0, 0]


ASYNC_RETURNS = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    async def execute(self, requests):
        how = pb_utils.get_input_tensor_by_name(requests[0], "HOW").as_numpy()[0].decode()
        if how == "tuple":
            return tuple(pb_utils.InferenceResponse([]) for _ in requests)
        if how == "too_few":
            return []
        if how == "not_response":
            return ["nope" for _ in requests]
        return [None for _ in requests]
"""

ASYNC_RETURNS_IO = """backend: "python"
input [ { name: "HOW" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
parameters: { key: "PYBACKEND_ASYNC_EXECUTE_CONCURRENCY" value: { string_value: "2" } }
"""


@BOTH
def test_background_coroutines_follow_the_return_rules(triton_model: Any, tmp_path: Path) -> None:
    """With PYBACKEND_ASYNC_EXECUTE_CONCURRENCY above 1 the stub runs a default-mode
    coroutine in the background and answers its return value through the senders; the
    rules and texts are the return path's (stub/returns.py), as in-process."""
    model = triton_model(write_model(tmp_path, "bg", ASYNC_RETURNS, ASYNC_RETURNS_IO))
    prefix = "Failed to process the request(s) for model 'bg_0', message: "
    expected = {
        "tuple": "Expected a list in the execute return, found type '<class 'tuple'>'.",
        "too_few": "Number of InferenceResponse objects do not match the number of "
        "InferenceRequest objects. InferenceRequest(s) size is:1, and InferenceResponse(s) "
        "size is:0\n",
        "not_response": "Expected an 'InferenceResponse' object in the execute function "
        "return list, found type '<class 'str'>'.",
        "none": "execute returned None for this request and its response sender sent "
        "nothing, so the request would never complete. Return an InferenceResponse for it "
        "or send one with request.get_response_sender().",
    }
    for case, text in expected.items():
        with pytest.raises(InferError) as info:
            model.infer(how(case))
        assert info.value.message == prefix + text


BLS_IN_FINALIZE = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]

    def finalize(self):
        request = pb_utils.InferenceRequest(
            model_name="anything", inputs=[pb_utils.Tensor("X", np.zeros(1, np.float32))],
            requested_output_names=["Y"])
        try:
            request.exec()
        except pb_utils.TritonModelException as e:
            pb_utils.Logger.log_warn("finalize: " + str(e))
"""


def test_bls_from_finalize_is_refused_as_by_the_server(tmp_path: Path) -> None:
    # The stub's text and exception (conformance bls/test_bls_finalize.py, both backends).
    with ModelHarness(write_model(tmp_path, "bls_in_finalize", BLS_IN_FINALIZE)) as model:
        pass
    assert [r.message for r in model.logs] == [
        "finalize: BLS is only supported during the 'execute' function."
    ]
