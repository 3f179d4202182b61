"""NVIDIA's qa L0_backend_python/io and /ensemble on the CPU (docs/qa_coverage.md): ensembles
of python models (plain and decoupled), outputs filtered by the requested ones, a prior crash
with a decoupled batching model, empty outputs and one batch of differently shaped outputs."""

from __future__ import annotations

import concurrent.futures

import numpy as np
import pytest
import tritonclient.grpc as grpcclient

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error
from conformance_support.streaming import Stream
from conformance_support.stub_env import needs_torch

MODELS = [
    "qa_add_sub",
    "qa_ensemble_add_sub",
    "qa_ensemble_io",
    "qa_ensemble_io_decoupled",
    "qa_io_identity_decoupled",
    "qa_llm",
    "qa_empty_output",
    "qa_empty_numpy_dlpack",
    "qa_variable_output",
]
# The CPU share of qa's eight GPU_OUTPUT combinations: every step keeps its output on the CPU.
CPU_FLAGS = np.array([False, False, False])


@pytest.fixture(scope="module")
def server(feature_repository):
    # short_exit: the stub the original loses to qa_empty_numpy_dlpack holds its shutdown
    # for the whole default exit timeout.
    with feature_repository.start_models(MODELS, short_exit=True) as srv:
        yield srv


def _add_sub_inputs() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(7)
    return {
        "INPUT0": rng.random(16, dtype=np.float32),
        "INPUT1": rng.random(16, dtype=np.float32),
    }


# ------------------------------------------------------------------ qa ensemble, io ensemble
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_ensemble_of_two_add_sub_steps(server, protocol):
    inputs = _add_sub_inputs()
    result = infer(server, protocol, "qa_ensemble_add_sub", inputs)
    np.testing.assert_allclose(result.outputs["OUTPUT0"], 2 * inputs["INPUT0"], atol=1e-6)
    np.testing.assert_allclose(result.outputs["OUTPUT1"], 2 * inputs["INPUT1"], atol=1e-6)


def test_ensemble_io_passes_dlpack_outputs_along_the_chain(server):
    """qa IOTest.test_ensemble_io, trial default: requests on one gRPC stream, one answer each."""
    input0 = np.random.default_rng(1).random(1000, dtype=np.float32)
    with Stream(server) as stream:
        for i in range(3):
            stream.send("qa_ensemble_io", {"INPUT0": input0, "GPU_OUTPUT": CPU_FLAGS}, f"r{i}")
            events = stream.until_final(1)
            answers = [e for e in events if e.outputs]
            assert [e.error for e in events] == [None] * len(events)
            assert len(answers) == 1
            np.testing.assert_array_equal(answers[0].outputs["OUTPUT0"], input0)


def test_ensemble_io_of_decoupled_steps(server):
    """qa IOTest.test_ensemble_io, trial decoupled: each step answers twice from a thread, so
    the ensemble's answers multiply along the chain (2 * 2 * 2); every one carries INPUT0."""
    input0 = np.random.default_rng(2).random(1000, dtype=np.float32)
    with Stream(server) as stream:
        stream.send("qa_ensemble_io_decoupled", {"INPUT0": input0, "GPU_OUTPUT": CPU_FLAGS})
        events = stream.until_final(1)
    answers = [e for e in events if e.outputs]
    assert [e.error for e in events] == [None] * len(events)
    assert len(answers) == 8
    for answer in answers:
        np.testing.assert_array_equal(answer.outputs["OUTPUT0"], input0)


# ------------------------------------------------------------------------ requested outputs
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requested_output_default(server, protocol):
    """qa IOTest.test_requested_output_default: only the asked-for output comes back; with
    none asked for, all of them."""
    inputs = _add_sub_inputs()
    only = infer(server, protocol, "qa_add_sub", inputs, ["OUTPUT1"])
    assert list(only.outputs) == ["OUTPUT1"]
    np.testing.assert_allclose(only.outputs["OUTPUT1"], inputs["INPUT0"] - inputs["INPUT1"])
    both = infer(server, protocol, "qa_add_sub", inputs)
    assert sorted(both.outputs) == ["OUTPUT0", "OUTPUT1"]
    np.testing.assert_allclose(both.outputs["OUTPUT0"], inputs["INPUT0"] + inputs["INPUT1"])


def _decoupled_answers(server, outputs):
    input0 = np.random.default_rng(3).random(4, dtype=np.float32)
    flags = np.array([True, False, True, False])
    with Stream(server) as stream:
        stream.send(
            "qa_io_identity_decoupled",
            {"INPUT0": input0, "GPU_OUTPUT": flags},
            outputs=outputs,
        )
        events = stream.until_final(1)
    assert [e.error for e in events] == [None] * len(events)
    return input0, flags, [e for e in events if e.outputs]


def test_requested_output_decoupled(server):
    """qa IOTest.test_requested_output_decoupled: the filter applies to every response a
    decoupled model sends."""
    asked = [grpcclient.InferRequestedOutput("OUTPUT0")]
    input0, _, answers = _decoupled_answers(server, asked)
    assert len(answers) == 2
    for answer in answers:
        assert list(answer.outputs) == ["OUTPUT0"]
        np.testing.assert_array_equal(answer.outputs["OUTPUT0"], input0)
    input0, flags, answers = _decoupled_answers(server, None)
    assert len(answers) == 2
    for answer in answers:
        assert sorted(answer.outputs) == ["NEXT_GPU_OUTPUT", "OUTPUT0"]
        np.testing.assert_array_equal(answer.outputs["NEXT_GPU_OUTPUT"], flags[1:])


def test_requested_output_decoupled_prior_crash(server):
    """qa IOTest.test_requested_output_decoupled_prior_crash: a decoupled batching model with
    a BYTES output, asked for one of its two outputs, answers that one."""
    with Stream(server) as stream:
        stream.send(
            "qa_llm",
            {"text_input": bytes_input("test").reshape(1, 1)},
            outputs=[grpcclient.InferRequestedOutput("text_output")],
        )
        events = stream.until_final(1)
    answers = [e for e in events if e.outputs]
    assert [e.error for e in events] == [None] * len(events)
    assert [list(a.outputs) for a in answers] == [["text_output"]]
    assert answers[0].outputs["text_output"].reshape(-1)[0] == b"bla0"


# -------------------------------------------------------------------------- output shapes
@pytest.mark.parametrize(
    "way",
    [0, pytest.param(1, marks=needs_torch())],
    ids=["tensor", "torch_from_dlpack"],
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_empty_output(server, protocol, way):
    """qa IOTest.test_empty_gpu_output on the CPU: a torch tensor of shape (0,) through
    Tensor.from_dlpack as there, and a plain pb_utils.Tensor of an empty array."""
    inputs = {"INPUT": np.array([[way]], np.float32)}
    result = infer(server, protocol, "qa_empty_output", inputs)
    assert result.outputs["OUTPUT"].size == 0


EMPTY_NUMPY = {"INPUT": np.array([[1.0]], np.float32)}


@pytest.mark.deviation("the original's stub dies on from_dlpack of an empty numpy array")
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_empty_numpy_array_through_from_dlpack(server, protocol):
    result = infer(server, protocol, "qa_empty_numpy_dlpack", EMPTY_NUMPY)
    assert result.outputs["OUTPUT"].size == 0


@pytest.mark.deviation("pins the original's dead stub", backend="original")
def test_original_stub_dies_on_from_dlpack_of_an_empty_numpy_array(server):
    error = infer_error(server, "grpc", "qa_empty_numpy_dlpack", EMPTY_NUMPY)
    assert "Stub process 'qa_empty_numpy_dlpack_0_0' is not healthy." in error.message


def test_variable_output_shapes_in_one_batch(server):
    """qa IOTest.test_variable_gpu_output on the CPU: five requests in one batch, answer i
    has i + 1 elements, all equal to i + 1."""

    def one(n: int):
        return infer(server, "grpc", "qa_variable_output", {"INPUT": np.array([[n]], np.float32)})

    with concurrent.futures.ThreadPoolExecutor(5) as pool:
        results = list(pool.map(one, range(1, 6)))
    for n, result in zip(range(1, 6), results):
        assert int(result.outputs["BATCH"].reshape(-1)[0]) == 5
        np.testing.assert_array_equal(result.outputs["OUTPUT"], np.full(n, n, np.float32))
