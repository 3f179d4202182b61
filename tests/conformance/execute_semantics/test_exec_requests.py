"""Request accessors, requested-output filtering, response parameters, async execute and
sequence correlation ids (spec 3.2, 4.3, 2.2), over HTTP and gRPC."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error, text_output

MODELS = ["filter_outputs", "response_params", "request_echo", "async_execute", "sequence_echo"]
ONE = {"IN": np.array([1], np.int32)}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=MODELS) as srv:
        yield srv


def echo(server, protocol, model="request_echo", outputs=("INFO",), **kwargs):
    result = infer(server, protocol, model, ONE, list(outputs) if outputs else None, **kwargs)
    return json.loads(text_output(result, "INFO")), result


# ------------------------------------------------------------------ requested outputs
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", ["return", "sender"])
@pytest.mark.parametrize("requested", [["B"], ["A", "C"], ["C"]])
def test_unrequested_outputs_are_dropped(server, protocol, path, requested):
    """Both the return path and the response sender prune outputs (spec 4.3)."""
    result = infer(server, protocol, "filter_outputs", {"PATH": bytes_input(path)}, requested)
    assert sorted(result.outputs) == requested
    if "C" in requested:
        # requested_output_names() is a set holding exactly what the client asked for.
        assert result.outputs["C"].tolist() == [n.encode() for n in requested] + [b"set"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_requested_outputs_means_all(server, protocol):
    result = infer(server, protocol, "filter_outputs", {"PATH": bytes_input("return")})
    assert sorted(result.outputs) == ["A", "B", "C"]
    assert result.outputs["C"].tolist() == [b"A", b"B", b"C", b"set"]


# ------------------------------------------------------------------ request accessors
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_defaults(server, protocol):
    info, result = echo(server, protocol, outputs=None)
    assert info == {
        "request_id": "",
        "correlation_id": 0,
        "correlation_id_type": "int",
        "flags": 0,
        "timeout": 0,
        "parameters": "{}",
        "parameters_type": "str",
        "requested_output_names": ["EXTRA", "INFO"],
    }
    assert sorted(result.outputs) == ["EXTRA", "INFO"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_id_and_timeout(server, protocol):
    info, _ = echo(server, protocol, request_id="rid-\u00e9-1", timeout=123456)
    assert info["request_id"] == "rid-\u00e9-1"
    assert info["timeout"] == 123456


PARAMETERS = {"s": "str", "i": 5, "neg": -3, "b": True, "no": False, "f": 1.5, "big": 2**40}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_request_parameters_of_every_type(server, protocol):
    """parameters() is JSON text; string, int, bool and double parameters keep their type."""
    info, _ = echo(server, protocol, parameters=PARAMETERS)
    parsed = json.loads(info["parameters"])
    assert parsed == PARAMETERS
    assert {k: type(v).__name__ for k, v in parsed.items()} == {
        k: type(v).__name__ for k, v in PARAMETERS.items()
    }


def test_request_parameters_json_text_over_http(server):
    """Over HTTP the parameter order is the client's, so the exact text is known."""
    info, _ = echo(server, "http", parameters=PARAMETERS)
    assert info["parameters"] == (
        '{"s":"str","i":5,"neg":-3,"b":true,"no":false,"f":1.5,"big":1099511627776}'
    )


# ------------------------------------------------------------------ response parameters
RESPONSE_PARAMETERS = {"text": "hello", "number": 42, "negative": -7, "yes": True, "no": False}


@pytest.mark.deviation(
    "InferenceResponse(parameters=...) is upstream HEAD behaviour (spec 3.2); the 24.10 "
    "original in the wheel has no such argument"
)
@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("path", ["return", "sender"])
def test_response_parameters_reach_the_client(server, protocol, path):
    result = infer(server, protocol, "response_params", {"PATH": bytes_input(path)})
    assert result.outputs["OUT"].tolist() == [1]
    assert result.parameters == RESPONSE_PARAMETERS


@pytest.mark.deviation("pins that the 24.10 original lacks response parameters", backend="original")
def test_original_has_no_response_parameters(server):
    error = infer_error(server, "grpc", "response_params", {"PATH": bytes_input("return")})
    assert error.message.startswith(
        "Failed to process the request(s) for model 'response_params_0', message: "
        "TypeError: __init__(): incompatible constructor arguments."
    )


# ------------------------------------------------------------------ async def execute
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_async_execute(server, protocol):
    data = np.array([1, 2, 3], np.int32)
    result = infer(server, protocol, "async_execute", {"IN": data})
    assert result.outputs["OUT"].tolist() == [2, 4, 6]
    assert text_output(result, "LOOP").endswith("EventLoop")


# ------------------------------------------------------------------ sequences
START, END = 1, 2


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("sequence_id", [42, "seq-\u00e9-42"], ids=["int", "string"])
def test_sequence_flags_and_correlation_id(server, protocol, sequence_id):
    steps = [(True, False, START), (False, False, 0), (False, True, END)]
    for start, end, flags in steps:
        info, _ = echo(
            server,
            protocol,
            "sequence_echo",
            sequence_id=sequence_id,
            sequence_start=start,
            sequence_end=end,
        )
        assert info["correlation_id"] == sequence_id
        assert info["correlation_id_type"] == type(sequence_id).__name__
        assert info["flags"] == flags


@pytest.mark.parametrize(
    "protocol,sequence_id", [("http", 2**64 - 1), ("grpc", 2**63 - 1)], ids=["http", "grpc"]
)
def test_sequence_large_integer_id(server, protocol, sequence_id):
    """uint64 ids survive (tritonclient's gRPC side only sends int64)."""
    info, _ = echo(
        server,
        protocol,
        "sequence_echo",
        sequence_id=sequence_id,
        sequence_start=True,
        sequence_end=True,
    )
    assert info["correlation_id"] == sequence_id
    assert info["flags"] == START | END


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_correlation_id_reaches_a_non_sequence_model(server, protocol):
    info, _ = echo(server, protocol, sequence_id=9, sequence_start=True)
    assert info["correlation_id"] == 9
    assert info["flags"] == START
