"""The examples of triton-inference-server/python_backend that NVIDIA's qa
`L0_backend_python/examples/test.sh` runs and no other module of ours already serves, each
model rewritten from its README and asked what the example's client asks: the decoupled
square and repeat models, BLS to the decoupled square model (sync and async), and the two
auto-complete models. docs/qa_coverage.md maps the other examples."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer
from conformance_support.control import model_config
from conformance_support.streaming import Stream

MODELS = [
    "square_int32",
    "repeat_int32",
    "bls_decoupled_sync",
    "bls_decoupled_async",
    "nobatch_auto_complete",
    "batch_auto_complete",
]
TIMEOUT_S = 60.0


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=MODELS) as srv:
        yield srv


def test_square_int32_answers_n_responses_of_n(server):
    """square_client: IN = 4, 2, 0, 1 on one stream; request i gets IN[i] responses, each
    OUT = [IN[i]] (none for 0), then its final flag."""
    sent = [4, 2, 0, 1]
    with Stream(server) as stream:
        for i, n in enumerate(sent):
            stream.send("square_int32", {"IN": np.array([n], np.int32)}, request_id=str(i))
        events = stream.until_final(len(sent), TIMEOUT_S)
    assert all(e.error is None for e in events), [e.error for e in events]
    for i, n in enumerate(sent):
        mine = [e for e in events if e.request_id == str(i)]
        assert [e.value() for e in mine if e.outputs] == [n] * n
        assert mine[-1].final and not mine[-1].outputs
        assert all(e.outputs["OUT"].dtype == np.int32 for e in mine if e.outputs)


def test_repeat_int32_answers_each_element_in_order(server):
    """repeat_client: IN = [4, 2, 0, 1] gives four responses, OUT = IN[i] and IDX = i in
    order; execute returns (after WAIT) before the last ones are sent."""
    inputs = {
        "IN": np.array([4, 2, 0, 1], np.int32),
        "DELAY": np.array([1, 2, 3, 4], np.uint32),
        "WAIT": np.array([2], np.uint32),
    }
    with Stream(server) as stream:
        stream.send("repeat_int32", inputs, request_id="0")
        events = stream.until_final(1, TIMEOUT_S)
    assert all(e.error is None for e in events), [e.error for e in events]
    answers = [e for e in events if e.outputs]
    assert [e.value("OUT") for e in answers] == [4, 2, 0, 1]
    assert [e.value("IDX") for e in answers] == [0, 1, 2, 3]
    assert {e.outputs["IDX"].dtype for e in answers} == {np.dtype(np.uint32)}
    assert events[-1].final and not events[-1].outputs


@pytest.mark.parametrize("model,calls", [("bls_decoupled_sync", 1), ("bls_decoupled_async", 2)])
@pytest.mark.parametrize("n", [0, 1, 3])
def test_bls_to_the_decoupled_square_model_sums_its_stream(server, model, calls, n):
    """bls_decoupled sync/async clients: SUM is the sum of the OUT of every response of
    square_int32 (n times n per call; 0 when it sends none)."""
    result = infer(server, "http", model, {"IN": np.array([n], np.int32)})
    assert result.outputs["SUM"].tolist() == [calls * n * n]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model,batch", [("nobatch_auto_complete", 0), ("batch_auto_complete", 4)])
def test_auto_complete_models_get_the_config_they_declare(server, protocol, model, batch):
    """auto_complete client: max_batch_size and the FP32 [4] inputs and outputs, taken from
    the models' auto_complete_config (their directories have no config.pbtxt)."""
    config = model_config(server, protocol, model)
    assert int(config.get("max_batch_size", 0)) == batch  # gRPC omits a 0
    for key, names in (("input", ["INPUT0", "INPUT1"]), ("output", ["OUTPUT0", "OUTPUT1"])):
        seen = [(t["name"], t["data_type"], [int(d) for d in t["dims"]]) for t in config[key]]
        assert seen == [(name, "TYPE_FP32", [4]) for name in names]
    assert ("dynamic_batching" in config) == (batch > 0)


@pytest.mark.parametrize("model", ["nobatch_auto_complete", "batch_auto_complete"])
def test_auto_complete_models_serve(server, model):
    first = np.arange(4, dtype=np.float32)
    second = np.full(4, 0.5, dtype=np.float32)
    if model == "batch_auto_complete":
        first, second = first[None, :], second[None, :]
    result = infer(server, "http", model, {"INPUT0": first, "INPUT1": second})
    assert np.array_equal(result.outputs["OUTPUT0"], first + second)
    assert np.array_equal(result.outputs["OUTPUT1"], first - second)
