"""BLS with exec() (spec 3.2 InferenceRequest, 4.6): requests to python models and
ensembles, request fields on the way in, outputs, errors returned as responses."""

from __future__ import annotations

import json

import pytest
from bls_support import CALLEES, CALLERS, NOT_READY, run


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=CALLEES + CALLERS)
    with start as srv:
        yield srv


def test_exec_returns_the_callee_outputs(server):
    outputs = run(server, "sync")["outputs"]
    assert outputs["OUTPUT0"] == [3.0, 1.0]
    assert outputs["OUTPUT1"] == [6.0, 2.0]
    assert json.loads(outputs["PARAMS"][0]) == {}


def test_request_fields_reach_the_callee(server):
    outputs = run(server, "request_fields")["outputs"]
    assert json.loads(outputs["PARAMS"][0]) == {"text": "hello", "number": 3, "flag": True}
    info = json.loads(outputs["REQUEST_INFO"][0])
    assert info == {"request_id": "bls-42", "correlation_id": 7, "flags": 0}


def test_big_request_and_answer_bodies(server):
    assert run(server, "big_parameters") == {"lengths": [70_000, 200_000]}


def test_string_correlation_id_reaches_the_callee(server):
    info = json.loads(run(server, "string_correlation_id")["outputs"]["REQUEST_INFO"][0])
    assert info["correlation_id"] == "session-9"


def test_only_requested_outputs_come_back(server):
    assert run(server, "requested_subset")["outputs"] == {"OUTPUT1": [6.0, 2.0]}


def test_the_callers_own_input_tensor_can_be_passed_on(server):
    assert run(server, "input_passthrough") == {"sum": 4.0, "size": 2}


def test_large_tensors_travel_through_shared_memory(server):
    assert run(server, "large", [0.5]) == {"equal": True, "size": 262144}


def test_bytes_outputs_are_object_arrays_of_bytes(server):
    assert run(server, "bytes") == {"dtype": "object", "shape": [1], "type": "bytes"}


def test_ensemble_as_callee(server):
    assert run(server, "ensemble")["outputs"] == {"ENS_OUT": [3.0, 1.0]}


def test_model_version(server):
    result = run(server, "model_version")
    assert result["good"]["outputs"] == {"OUTPUT0": [3.0, 1.0]}
    assert result["bad"]["error"] == (
        "Model bls_identity - Error when running inference: Failed for execute the inference "
        "request. Model 'bls_identity' is not ready."
    )


def test_missing_model_is_an_error_response_not_an_exception(server):
    result = run(server, "missing_model")
    assert result == {"error": NOT_READY, "code": 1}


def test_invalid_input_is_an_error_response(server):
    result = run(server, "bad_input")
    assert result["error"] == (
        "Model bls_identity - Error when running inference: unexpected inference input 'WRONG' "
        "for model 'bls_identity'"
    )
    assert result["code"] == 1


def test_callee_error_comes_back_as_a_response(server):
    assert run(server, "error_response")["error"] == "bls_error says no"


@pytest.mark.deviation("spec 4.6 (newer than the original 24.10 here): the callee's code is kept")
def test_callee_error_keeps_its_code(server):
    assert run(server, "error_response")["code"] == 2  # NOT_FOUND


def test_decoupled_callee_needs_the_decoupled_flag(server):
    assert run(server, "decoupled_without_flag") == {
        "error": "Model bls_stream - Error when running inference: Model bls_stream is using the "
        "decoupled. The current BLS request call doesn't support models using the decoupled "
        "transaction policy. Please use 'decoupled=True' argument to the 'exec' or 'async_exec' "
        "calls for decoupled models.'",
        "code": 1,
    }


def test_calls_from_several_threads_at_once(server):
    results = run(server, "threads")["results"]
    assert results == [[3.0 + i, 1.0 + i] for i in range(6)]


def test_many_calls_in_one_execute(server):
    assert run(server, "many") == {"total": 1600.0}


def test_shared_memory_does_not_grow_with_calls(server):
    first, second = run(server, "shared_memory_growth")["sizes"]
    assert second <= first + (4 << 20), (first, second)


@pytest.mark.deviation(
    "InferenceResponse(parameters=...) and response.parameters() are newer than the original "
    "24.10 available here (spec 3.2)"
)
def test_callee_response_parameters(server):
    result = run(server, "response_parameters")
    assert result["outputs"] == {"OUTPUT0": [3.0, 1.0]}
    assert result["parameters"] == {"callee": "bls_params", "count": 2, "ok": True}


@pytest.mark.deviation("without a GPU, preferred GPU memory is served from CPU shared memory")
def test_preferred_gpu_memory_without_a_gpu_still_answers(server):
    assert run(server, "prefer_gpu") == {"is_cpu": True, "OUTPUT0": [3.0, 1.0]}


@pytest.mark.deviation("the original fails the call without a usable GPU", backend="original")
def test_original_fails_preferred_gpu_memory_without_a_gpu(server):
    assert "all allocation types failed" in run(server, "prefer_gpu")["error"]
