"""Ensembles whose steps are python models (models/ens_*): BYTES through two steps, a step
output the ensemble does not map (the step is not asked for it), a step's exception and error
response reaching the ensemble's client, and a decoupled python step inside an ensemble."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, infer_error, text_output
from conformance_support.streaming import Stream

MODELS = ["ens_upper", "ens_suffix", "ens_repeat", "ens_text", "ens_stream"]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models(MODELS) as srv:
        yield srv


def line_of(path, needle: str) -> int:
    lines = path.read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if needle in line)


def text(*values: bytes) -> np.ndarray:
    return np.array(values, np.object_)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_bytes_through_two_python_steps(server, protocol):
    values = text(b"ab", b"", b"x\x00y", b"\xff\xfe")
    result = infer(server, protocol, "ens_text", {"TEXT": values})
    assert result.datatypes == {"OUT": "BYTES", "SEEN": "BYTES"}
    assert result.outputs["OUT"].tolist() == [b"AB!", b"!", b"X\x00Y!", b"\xff\xfe!"]
    seen = json.loads(text_output(result, "SEEN"))
    # The ensemble asks its step only for the outputs it maps; LENGTHS is never sent.
    assert seen == {
        "requested": ["SEEN", "UPPER"],
        "dtype": "|O",
        "values": ["ab", "", "x\x00y", "\ufffd\ufffd"],
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_only_the_requested_ensemble_output(server, protocol):
    result = infer(server, protocol, "ens_text", {"TEXT": text(b"q")}, ["OUT"])
    assert result.outputs == {"OUT": result.outputs["OUT"]}
    assert result.outputs["OUT"].tolist() == [b"Q!"]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_step_that_raises(server, feature_repository, protocol):
    error = infer_error(server, protocol, "ens_text", {"TEXT": text(b"a", b"raise")})
    model_py = feature_repository.model_dir("ens_upper") / "1" / "model.py"
    assert error.message == (
        "in ensemble 'ens_text', Failed to process the request(s) for model 'ens_upper_0', "
        "message: ValueError: ens_upper was asked to raise\n\nAt:\n"
        f"  {model_py}({line_of(model_py, 'raise ValueError')}): execute\n"
    )
    assert error.status == ("500" if protocol == "http" else "StatusCode.INTERNAL")


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_steps_error_response(server, protocol):
    error = infer_error(server, protocol, "ens_text", {"TEXT": text(b"error")})
    assert error.message == "in ensemble 'ens_text', ens_suffix refuses ERROR"
    assert error.status == ("400" if protocol == "http" else "StatusCode.INVALID_ARGUMENT")


def test_a_decoupled_python_step(server):
    with Stream(server) as stream:
        stream.send("ens_stream", {"TEXT": text(b"a", b"b", b"c")}, request_id="r1")
        events = stream.until_final(1)
    assert all(e.error is None for e in events)
    outputs = [e.outputs["OUT"].tolist() for e in events if e.outputs]
    assert sorted(outputs) == [[b"a!"], [b"b!"], [b"c!"]]
    assert events[-1].final


def test_a_decoupled_step_whose_next_step_fails(server):
    with Stream(server) as stream:
        stream.send("ens_stream", {"TEXT": text(b"a", b"ERROR")}, request_id="r2")
        events = stream.until_final(1)
    errors = [e.error for e in events if e.error is not None]
    assert errors == ["in ensemble 'ens_stream', ens_suffix refuses ERROR"]
    assert [e.outputs["OUT"].tolist() for e in events if e.outputs] in ([], [[b"a!"]])
    assert events[-1].error is not None


def test_a_decoupled_ensemble_is_refused_over_http(server):
    error = infer_error(server, "http", "ens_stream", {"TEXT": text(b"a")})
    assert error.message == (
        "HTTP end point doesn't support models with decoupled transaction policy"
    )
    assert error.status == "501"
