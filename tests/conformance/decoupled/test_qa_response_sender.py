"""NVIDIA's qa L0_backend_python/response_sender, case by case (docs/qa_coverage.md): the
response sender before, on and after the return of execute, in decoupled and default mode,
with `def` and `async def` execute, one request or a dynamic batch of them per execute.

The client reads a gRPC stream the way the qa test does (no empty final responses) until
the server ends it. Each response's INDEX says when it was made (see models/qa_sender)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

BASE = "qa_sender"
VARIANTS = {
    # name: (decoupled, async execute, dynamic batching), as the qa test.sh builds them.
    "qa_sender": (False, False, False),
    "qa_sender_async": (False, True, False),
    "qa_sender_decoupled": (True, False, False),
    "qa_sender_decoupled_async": (True, True, False),
    "qa_sender_batching": (False, False, True),
    "qa_sender_async_batching": (False, True, True),
    "qa_sender_decoupled_batching": (True, False, True),
    "qa_sender_decoupled_async_batching": (True, True, True),
}
MUST_RETURN_NONE = "using the decoupled mode and the execute function must return None"

# The qa test's input plans: (before, final before, return one, after, final after).
ZERO_PRE = (0, True, False, 0, False)
ZERO_POST = (0, False, False, 0, True)
ONE_PRE = (1, True, False, 0, False)
ONE_POST = (0, False, False, 1, True)
TWO_PRE = (2, True, False, 0, False)
TWO_POST = (0, False, False, 2, True)
PRE_AND_POST = (1, False, False, 3, True)
ON_RETURN = (0, False, True, 0, False)
PRE_AND_ON = (1, True, True, 0, False)
ON_AND_POST = (0, False, True, 1, True)


def _make_variants(repository) -> None:
    base = repository.model_dir(BASE)
    text = (base / "config.pbtxt").read_text()
    for name, (decoupled, use_async, batching) in VARIANTS.items():
        if name == BASE:
            continue
        target = repository.model_dir(name)
        shutil.copytree(base, target)
        config = text
        if decoupled:
            config += "model_transaction_policy { decoupled: true }\n"
        if use_async:
            config += 'default_model_filename: "model_async.py"\n'
        if batching:
            # Long enough for the requests the client sends back to back to share a batch.
            config += "dynamic_batching { max_queue_delay_microseconds: 300000 }\n"
        (target / "config.pbtxt").write_text(config)


@pytest.fixture(scope="module")
def server(feature_repository):
    _make_variants(feature_repository)
    with feature_repository.start_models(list(VARIANTS), short_exit=True) as srv:
        yield srv


def _inputs(plan):
    before, final_before, returned, after, final_after = plan
    values = [
        ("NUMBER_OF_RESPONSE_BEFORE_RETURN", np.uint8, before, "UINT8"),
        ("SEND_COMPLETE_FINAL_FLAG_BEFORE_RETURN", bool, final_before, "BOOL"),
        ("RETURN_A_RESPONSE", bool, returned, "BOOL"),
        ("NUMBER_OF_RESPONSE_AFTER_RETURN", np.uint8, after, "UINT8"),
        ("SEND_COMPLETE_FINAL_FLAG_AFTER_RETURN", bool, final_after, "BOOL"),
    ]
    inputs = []
    for name, dtype, value, datatype in values:
        item = grpcclient.InferInput(name, [1, 1], datatype)
        item.set_data_from_numpy(np.array([[value]], dtype))
        inputs.append(item)
    return inputs


def stream(server, model, plans, timeout=20):
    """Send one request per plan on one stream; every message until the server ends it."""
    messages = []
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        # stream_timeout bounds the wait should a request never end.
        client.start_stream(lambda result, error: messages.append((result, error)), timeout)
        for plan in plans:
            client.async_stream_infer(model, _inputs(plan))
        client.stop_stream()  # returns once every request has ended
    finally:
        client.close()
    return messages


def counts(messages):
    """(responses sent before the return, responses returned, responses sent after)."""
    before = returned = after = 0
    for result, error in messages:
        assert error is None, error
        index = result.as_numpy("INDEX")
        response_id = index.sum() / index.shape[0]
        if response_id < 1000:
            returned += 1
        elif response_id < 2000:
            before += 1
        else:
            assert response_id < 3000, response_id
            after += 1
    return before, returned, after


def expected(plan):
    before, _, returned, after, _ = plan
    return before, int(returned), after


def only_error(messages):
    assert len(messages) == 1, messages
    result, error = messages[0]
    assert result is None and isinstance(error, InferenceServerException)
    return error.message()


DECOUPLED_PLANS = {
    "zero_response_pre_return": ZERO_PRE,
    "zero_response_post_return": ZERO_POST,
    "one_response_pre_return": ONE_PRE,
    "one_response_post_return": ONE_POST,
    "two_response_pre_return": TWO_PRE,
    "two_response_post_return": TWO_POST,
    "response_pre_and_post_return": PRE_AND_POST,
}


@pytest.mark.parametrize("model", ["qa_sender_decoupled", "qa_sender_decoupled_async"])
@pytest.mark.parametrize("case", list(DECOUPLED_PLANS))
def test_decoupled(server, model, case):
    plan = DECOUPLED_PLANS[case]
    assert counts(stream(server, model, [plan])) == expected(plan)


NON_DECOUPLED_PLANS = {
    "one_response_on_return": ON_RETURN,
    "one_response_pre_return": ONE_PRE,
    "one_response_post_return": ONE_POST,
}


@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
@pytest.mark.parametrize("case", list(NON_DECOUPLED_PLANS))
def test_non_decoupled_one_response(server, model, case):
    plan = NON_DECOUPLED_PLANS[case]
    assert counts(stream(server, model, [plan])) == expected(plan)


@pytest.mark.parametrize(
    "model", ["qa_sender_decoupled_batching", "qa_sender_decoupled_async_batching"]
)
def test_decoupled_multiple_requests(server, model):
    plans = list(DECOUPLED_PLANS.values())
    assert counts(stream(server, model, plans)) == (4, 0, 6)


@pytest.mark.parametrize("model", ["qa_sender_batching", "qa_sender_async_batching"])
def test_non_decoupled_multiple_requests(server, model):
    assert counts(stream(server, model, [ON_RETURN, ONE_PRE, ONE_POST])) == (1, 1, 1)


def test_decoupled_one_response_on_return(server):
    assert MUST_RETURN_NONE in only_error(stream(server, "qa_sender_decoupled", [ON_RETURN]))


def test_decoupled_one_response_pre_and_on_return(server):
    # The sent response closed the sender: the error of the returned one reaches no one.
    assert counts(stream(server, "qa_sender_decoupled", [PRE_AND_ON])) == (1, 0, 0)


def test_decoupled_one_response_on_and_post_return(server):
    # The error ends the request; the send after the return raises in the model's thread.
    messages = stream(server, "qa_sender_decoupled", [ON_AND_POST])
    assert MUST_RETURN_NONE in only_error(messages)


@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
def test_non_decoupled_zero_response_pre_return(server, model):
    message = only_error(stream(server, model, [ZERO_PRE]))
    assert "Non-decoupled model cannot send complete final before sending a response" in message


@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
def test_non_decoupled_two_response_pre_return(server, model):
    # The second send raises in execute; the stream already had the request's one response.
    assert counts(stream(server, model, [TWO_PRE])) == (1, 0, 0)


@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
def test_non_decoupled_one_response_pre_and_on_return(server, model):
    assert counts(stream(server, model, [PRE_AND_ON])) == (1, 0, 0)


@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
def test_non_decoupled_one_response_on_and_post_return(server, model):
    assert counts(stream(server, model, [ON_AND_POST])) == (0, 1, 0)


# Beyond the qa test: the cases it leaves out because they hang on the original.


def test_decoupled_async_one_response_on_and_post_return(server):
    # A coroutine that returns a value only logs the error: the sender the model kept
    # still answers the request after the return.
    assert counts(stream(server, "qa_sender_decoupled_async", [ON_AND_POST])) == (0, 0, 1)


@pytest.mark.deviation(
    "original: a decoupled coroutine that returns a value and took no sender leaves its "
    "request waiting forever; ours ends it with the error"
)
def test_decoupled_async_one_response_on_return(server):
    message = only_error(stream(server, "qa_sender_decoupled_async", [ON_RETURN]))
    assert MUST_RETURN_NONE in message


@pytest.mark.deviation(
    "original: a default-mode request whose sender fails after execute returned (FINAL "
    "first, a second response) waits forever; ours ends it when the sender is dropped (UV-10)"
)
@pytest.mark.parametrize("model", ["qa_sender", "qa_sender_async"])
def test_non_decoupled_zero_or_two_responses_post_return(server, model):
    assert "garbage-collected" in only_error(stream(server, model, [ZERO_POST]))
    assert counts(stream(server, model, [TWO_POST])) == (0, 0, 1)


@pytest.mark.deviation("pins the original's hangs that ours fixes", backend="original")
@pytest.mark.parametrize(
    "model,plan",
    [("qa_sender_decoupled_async", ON_RETURN), ("qa_sender", ZERO_POST), ("qa_sender", TWO_POST)],
)
def test_original_leaves_these_requests_waiting(server, model, plan):
    assert only_error(stream(server, model, [plan], timeout=1)) == "Deadline Exceeded"
