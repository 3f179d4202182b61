"""Model control from model code (spec 3.2 "Model control"): pb_utils.load_model,
unload_model and is_model_ready called from execute under --model-control-mode=explicit,
with the original's error texts."""

from __future__ import annotations

import json
import pathlib
from typing import Any

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, text_output
from conformance_support.control import (
    ORIGINAL_ABORTS,
    is_ready,
    load,
    load_error,
    unload,
    unloaded,
)

PREFIX = "Failed to process the request for model 'mc_controller_0', message: "
TARGET_SOURCE = (pathlib.Path(__file__).parent / "models/mc_target/1/model.py").read_text()
GENERATED_CONFIG = {
    "name": "mc_generated",
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}],
}


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=["mc_controller"])
    with start as srv:
        yield srv


def call(server: Any, mode: str, **kwargs: Any) -> dict:
    inputs = {"MODE": bytes_input(mode), "ARGS": bytes_input(json.dumps(kwargs))}
    reply = infer(server, "http", "mc_controller", inputs, client_timeout=120)
    return json.loads(text_output(reply, "RESULT"))


def test_load_query_and_unload(server):
    assert call(server, "ready", model_name="mc_target") == {"returned": False}
    assert call(server, "load", model_name="mc_target") == {"returned": None}
    assert is_ready(server, "mc_target")
    assert call(server, "ready", model_name="mc_target") == {"returned": True}
    assert call(server, "ready", model_name="mc_target", model_version="1") == {"returned": True}
    assert call(server, "ready", model_name="mc_target", model_version="2") == {"returned": False}
    assert call(server, "unload", model_name="mc_target") == {"returned": None}
    unloaded(server, "mc_target")
    assert call(server, "ready", model_name="mc_target") == {"returned": False}


def test_unknown_model_is_not_ready(server):
    assert call(server, "ready", model_name="no_such_model") == {"returned": False}


@ORIGINAL_ABORTS
@pytest.mark.parametrize("version, detail", [("abc", " (details: stol)"), ("-1", ""), ("-3", "")])
def test_bad_version_string(server, version, detail):
    assert call(server, "ready", model_name="mc_target", model_version=version) == {
        "raised": "TritonModelException: Failed to check model readiness: "
        + PREFIX
        + f"failed to get model version from specified version string '{version}'{detail}, "
        "version should be an integral value > 0"
    }


@ORIGINAL_ABORTS
def test_load_of_a_missing_model_raises(server):
    assert call(server, "load", model_name="no_such_model") == {
        "raised": "TritonModelException: Failed to load model: "
        + PREFIX
        + "failed to load 'no_such_model', failed to poll from model repository"
    }


@ORIGINAL_ABORTS
def test_load_of_a_failing_model_raises(server):
    raised = call(server, "load", model_name="mc_broken")["raised"]
    assert raised.startswith(
        "TritonModelException: Failed to load model: "
        + PREFIX
        + "load failed for model 'mc_broken': version 1 is at UNAVAILABLE state: Internal: "
        "RuntimeError: mc_broken refuses to start"
    ), raised
    unloaded(server, "mc_broken")


def test_files_must_be_a_dictionary(server):
    assert call(server, "load", model_name="mc_target", files="not a dict") == {
        "raised": "TritonModelException: failed to load model 'mc_target', files should be a "
        "dictionary of file paths and file contents"
    }


def test_load_with_config_and_files(server):
    result = call(
        server,
        "load",
        model_name="mc_generated",
        config=json.dumps(GENERATED_CONFIG),
        files={"file:1/model.py": TARGET_SOURCE},
    )
    assert result == {"returned": None}
    x = np.array([1.0, 2.0], np.float32)
    assert infer(server, "http", "mc_generated", {"INPUT0": x}).outputs["OUTPUT0"].tolist() == [
        1.0,
        2.0,
    ]
    unload(server, "mc_generated")


@ORIGINAL_ABORTS
def test_config_that_is_not_json_fails_the_load(server):
    raised = call(server, "load", model_name="mc_target", config="{not json")["raised"]
    assert raised.startswith("TritonModelException: Failed to load model: " + PREFIX), raised


def test_unload_dependents(server):
    assert call(server, "load", model_name="mc_ens") == {"returned": None}
    assert is_ready(server, "mc_target")
    result = call(server, "unload", model_name="mc_ens", unload_dependents=True)
    assert result == {"returned": None}
    unloaded(server, "mc_ens")
    unloaded(server, "mc_target")


def test_unload_of_an_unknown_model_is_quiet(server):
    assert call(server, "unload", model_name="no_such_model") == {"returned": None}


# NVIDIA's qa L0_backend_python/explicit and model_control (docs/qa_coverage.md): the same
# loads and unloads made by a client instead of model code.


def identity(server: Any, model: str, input_name: str, output_name: str) -> None:
    x = np.arange(16, dtype=np.float32)
    assert infer(server, "http", model, {input_name: x}).outputs[output_name].tolist() == x.tolist()


def test_qa_python_model_and_its_ensemble_reload_five_times(server):
    """qa explicit test_model_reload and model_control test_model_reload: the Python model
    loaded before its ensemble, both served, both unloaded, five times over."""
    for _ in range(5):
        assert not is_ready(server, "mc_target")
        load(server, "mc_target")
        load(server, "mc_ens")
        assert is_ready(server, "mc_target") and is_ready(server, "mc_ens")
        identity(server, "mc_target", "INPUT0", "OUTPUT0")
        identity(server, "mc_ens", "ENS_IN", "ENS_OUT")
        unload(server, "mc_ens")
        unload(server, "mc_target")
        assert not is_ready(server, "mc_target") and not is_ready(server, "mc_ens")


def test_qa_faulty_model_load_leaves_the_server_serving(server):
    """qa model_control test_faulty_model_load: auto_complete_config fails the load."""
    load(server, "mc_target")
    try:
        message = load_error(server, "qa_autocomplete_error")
        assert "load failed for model 'qa_autocomplete_error'" in message, message
        assert is_ready(server, "mc_target")
        assert not is_ready(server, "qa_autocomplete_error")
        identity(server, "mc_target", "INPUT0", "OUTPUT0")
    finally:
        unload(server, "mc_target")
