"""pb_utils at its edges, as the original's pybind11 binding has them, HTTP and gRPC: an
exception with an empty message or one that cannot be printed, the new list each accessor
returns (a model that clears or appends to it changes nothing), any release flags a model
sets, and numpy_to_triton_type's comparisons."""

from __future__ import annotations

import pytest

from conformance_support.clients import PROTOCOLS, bytes_input, infer, infer_error, text_output
from conformance_support.sources import marker_line

MODEL = "object_edges"
PREFIX = f"Failed to process the request(s) for model '{MODEL}_0', message: "


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL], short_exit=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def model_file(feature_repository):
    return feature_repository.model_dir(MODEL) / "1" / "model.py"


def run(server, protocol, mode):
    return infer(server, protocol, MODEL, {"MODE": bytes_input(mode)})


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize(
    "mode,rendered",
    [
        ("assert", "AssertionError: <EMPTY MESSAGE>"),
        ("key_error", "KeyError: <EMPTY MESSAGE>"),
        ("model_exception_empty", "TritonModelException: <EMPTY MESSAGE>"),
    ],
)
def test_an_empty_message_is_named(server, model_file, protocol, mode, rendered):
    error = infer_error(server, protocol, MODEL, {"MODE": bytes_input(mode)})
    frame = f"  {model_file}({marker_line(model_file, mode)}): execute\n"
    assert error.message == f"{PREFIX}{rendered}\n\nAt:\n{frame}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_message_that_cannot_be_printed(server, model_file, protocol):
    """str() of the exception raises: pybind11's placeholder, then that exception."""
    error = infer_error(server, protocol, MODEL, {"MODE": bytes_input("unprintable")})
    raised = f"  {model_file}({marker_line(model_file, 'unprintable')}): execute\n"
    printed = f"  {model_file}({marker_line(model_file, 'unprintable_str')}): __str__\n"
    assert error.message == (
        f"{PREFIX}UnprintableError: <MESSAGE UNAVAILABLE DUE TO ANOTHER EXCEPTION>\n\nAt:\n"
        f"{raised}\nMESSAGE UNAVAILABLE DUE TO EXCEPTION: RuntimeError: cannot print this "
        f"error\n\nAt:\n{printed}"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_clearing_the_inputs_list_keeps_the_inputs(server, protocol):
    assert run(server, protocol, "inputs_cleared").outputs["OUT"].tolist() == [1, 1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_clearing_the_outputs_list_keeps_the_outputs(server, protocol):
    assert run(server, protocol, "outputs_cleared").outputs["OUT"].tolist() == [3]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_appending_to_the_outputs_list_adds_nothing(server, protocol):
    result = run(server, protocol, "outputs_appended")
    assert result.outputs["OUT"].tolist() == [4, 1]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("flags", [0, 1, 5, 4294967295])
def test_any_release_flags_but_reschedule_release_the_request(server, protocol, flags):
    assert run(server, protocol, f"release_flags_{flags}").outputs["OUT"].tolist() == [7]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_numpy_to_triton_type_compares_as_the_originals(server, protocol):
    """Python's own types and a sized bytes dtype match no numpy type."""
    result = run(server, protocol, "type_codes")
    assert text_output(result, "MSG") == "[None, None, None, None, None, None, 11, 13, 9]"
