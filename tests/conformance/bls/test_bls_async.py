"""BLS with async_exec() from `async def execute` (spec 2.2, 3.2): fan-out with
asyncio.gather, a decoupled stream, and errors as responses."""

from __future__ import annotations

import pytest
from bls_support import CALLEES, CALLERS, NOT_READY, run


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=CALLEES + CALLERS)
    with start as srv:
        yield srv


def test_gather_of_async_exec(server):
    values = [float(v) for v in range(8)]
    result = run(server, "gather", values, model="bls_async_caller")
    assert result["outputs"] == [[2.0 * v, 2.0 * i] for i, v in enumerate(values)]


def test_async_exec_of_a_decoupled_model(server):
    result = run(server, "stream", [2], model="bls_async_caller")
    assert result["seen"] == [[[0]], [[1]], []]


def test_last_response_carrying_final_ends_the_iteration(server):
    # No empty response after one that carries the FINAL flag itself; a FINAL flag alone
    # is one empty response (qa async_execute_decouple_bls reads DUMMY_OUT of each).
    expected = {"1": [[[0]]], "3": [[[0]], [[1]], [[2]]], "0": [[]]}
    assert run(server, "stream_final", model="bls_async_caller") == expected
    expected["identity"] = [{"OUTPUT0": [3.0, 1.0]}]
    assert run(server, "stream_final") == expected


def test_async_exec_error_is_a_response(server):
    result = run(server, "error", model="bls_async_caller")
    assert result == {"has_error": True, "error": NOT_READY}


@pytest.mark.deviation("`async for` over a ResponseIterator is a pybackend extension")
def test_async_for_over_a_stream_keeps_the_loop_running(server):
    result = run(server, "async_for", [3], model="bls_async_caller")
    assert result == {"seen": [[[0]], [[1]], [[2]], []], "ticked": True}
