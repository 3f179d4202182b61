"""auto_complete_config with auto-complete enabled (the default): the completed config is
what the server uses and shows, and the ModelConfig helpers raise the spec's errors
(spec 2.1, 3.1)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output
from conformance_support.control import load_error, model_config

GOOD_MODELS = ["ac_full", "ac_no_config_file", "ac_decoupled", "ac_marker", "ac_helpers"]


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(model_control_mode="explicit", load_models=GOOD_MODELS)
    with start as srv:
        yield srv


def tensors(config: dict, key: str) -> list[tuple]:
    return [
        (t["name"], t["data_type"], t["dims"], t.get("optional", False))
        for t in config.get(key, [])
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("model", ["ac_full", "ac_no_config_file"])
def test_completed_config_is_served(server, protocol, model):
    """A config.pbtxt naming only the backend (or none at all) is completed by the model."""
    config = model_config(server, protocol, model)
    assert config["max_batch_size"] == 8
    assert tensors(config, "input") == [
        ("IN0", "TYPE_FP32", [4], False),
        ("IN1", "TYPE_INT32", [-1], True),
    ]
    assert tensors(config, "output") == [("OUT0", "TYPE_FP32", [4], False)]
    # set_dynamic_batching() added dynamic_batching {}; the core then filled it in.
    assert [int(n) for n in config["dynamic_batching"]["preferred_batch_size"]] == [8]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_completed_model_serves(server, protocol):
    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    result = infer(server, protocol, "ac_full", {"IN0": data})
    np.testing.assert_array_equal(result.outputs["OUT0"], data * 2)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_transaction_policy_is_applied(server, protocol):
    config = model_config(server, protocol, "ac_decoupled")
    assert config["model_transaction_policy"]["decoupled"] is True


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_existing_config_is_extended(server, feature_repository, protocol):
    config = model_config(server, protocol, "ac_marker")
    assert tensors(config, "input") == [
        ("IN", "TYPE_INT32", [-1], False),
        ("EXTRA", "TYPE_FP32", [2], True),
    ]


def test_called_on_the_class_with_a_model_config(server, feature_repository):
    marker = feature_repository.model_dir("ac_marker") / "auto_complete_called.json"
    assert json.loads(marker.read_text()) == {
        "instances_created": 0,
        "config_type": "ModelConfig",
        "name": "ac_marker",
        "input_names": ["IN"],
    }


# ------------------------------------------------------------- helper errors, exactly
@pytest.fixture(scope="module")
def helper_results(server):
    result = infer(server, "http", "ac_helpers", {"IN": np.array([1], np.int32)})
    return json.loads(text_output(result, "RESULTS"))


def ok(**fields) -> str:
    config = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    config.update(fields)
    return "ok:" + json.dumps(config, sort_keys=True)


X_INT = {"name": "X", "data_type": "TYPE_INT32", "dims": [1]}
X_FP = {"name": "X", "data_type": "TYPE_FP32", "dims": [1]}
HELPER_OUTCOMES = {
    "max_batch_lower": "ValueError:configuration specified max_batch_size 8, but in "
    "auto-complete-config function for model 'm' specified max_batch_size 4",
    "max_batch_higher": ok(max_batch_size=8),
    "dynamic_new": ok(dynamic_batching={}),
    "dynamic_existing": ok(dynamic_batching={"max_queue_delay_microseconds": 5}),
    "dynamic_with_sequence": "ValueError:Configuration specified scheduling_choice as "
    "'sequence_batching', but auto-complete-config function for model 'm' tries to set "
    "scheduling_choice as 'dynamic_batching'",
    "dynamic_with_ensemble": "ValueError:Configuration specified scheduling_choice as "
    "'ensemble_scheduling', but auto-complete-config function for model 'm' tries to set "
    "scheduling_choice as 'dynamic_batching'",
    "input_new": ok(input=[dict(X_FP, optional=True)]),
    "input_extra_key": "ValueError:input 'X' in auto-complete-config function for model 'm' "
    "contains property other than 'name', 'data_type', 'dims' and 'optional'.",
    "input_missing_name": "ValueError:input in auto-complete-config function for model 'm' "
    "is missing 'name' property.",
    "input_missing_data_type": "ValueError:input 'X' in auto-complete-config function for "
    "model 'm' is missing 'data_type' property.",
    "input_missing_dims": "ValueError:input 'X' in auto-complete-config function for model "
    "'m' is missing 'dims' property.",
    "input_conflict_dtype": "ValueError:unable to load model 'm', configuration expects "
    "datatype TYPE_INT32 for input 'X', model provides TYPE_FP32",
    "input_conflict_dims": "ValueError:model 'm', tensor 'X': the model expects dims [2, 3] "
    "but the model configuration specifies dims [1]",
    "input_conflict_optional": "ValueError:model 'm', tensor 'X': the model expects optional "
    "True but the model configuration specifies optional False",
    "input_fills_invalid": ok(input=[X_FP]),
    "input_same": ok(input=[X_INT]),
    "output_new": ok(output=[X_FP]),
    "output_extra_key": "ValueError:output 'X' in auto-complete-config function for model "
    "'m' contains property other than 'name', 'data_type' and 'dims'.",
    "output_missing_dims": "ValueError:output 'X' in auto-complete-config function for model "
    "'m' is missing 'dims' property.",
    "output_conflict_dtype": "ValueError:unable to load model 'm', configuration expects "
    "datatype TYPE_INT32 for output 'X', model provides TYPE_FP32",
    "output_conflict_dims": "ValueError:model 'm', tensor 'X': the model expects dims [4] but "
    "the model configuration specifies dims [1]",
    "policy_new": ok(model_transaction_policy={"decoupled": True}),
    "policy_extra_key": "ValueError:model transaction property in auto-complete-config "
    "function for model 'm' contains property other than 'decoupled'.",
    "policy_change": "ValueError:trying to change decoupled property in auto-complete-config "
    "for model 'm', which is already set to 'False'.",
    "policy_same": ok(model_transaction_policy={"decoupled": True}),
    "as_dict_is_live": ok(max_batch_size=3),
}


@pytest.mark.parametrize("case", list(HELPER_OUTCOMES))
def test_model_config_helper(helper_results, case):
    assert helper_results[case] == HELPER_OUTCOMES[case]


def test_every_helper_case_is_checked(helper_results):
    assert sorted(helper_results) == sorted(HELPER_OUTCOMES)


# ------------------------------------------------------------- failures at load time
def load_failed(model: str) -> str:
    return f"load failed for model '{model}': version 1 is at UNAVAILABLE state: Internal: "


def test_helper_error_fails_the_load(server, feature_repository):
    """The ValueError reaches the load error with its traceback, ending in the model."""
    model_file = feature_repository.model_dir("ac_bad_max_batch") / "1" / "model.py"
    message = load_error(server, "ac_bad_max_batch")
    assert message.startswith(
        load_failed("ac_bad_max_batch") + "ValueError: configuration specified max_batch_size "
        "8, but in auto-complete-config function for model 'ac_bad_max_batch' specified "
        "max_batch_size 4\n\nAt:\n"
    )
    assert message.endswith(f"  {model_file}(4): auto_complete_config\n;\n")


def test_conflicting_input_fails_the_load(server, feature_repository):
    model_file = feature_repository.model_dir("ac_conflict_dtype") / "1" / "model.py"
    message = load_error(server, "ac_conflict_dtype")
    assert message.startswith(
        load_failed("ac_conflict_dtype") + "ValueError: unable to load model "
        "'ac_conflict_dtype', configuration expects datatype TYPE_INT32 for input 'IN', "
        "model provides TYPE_FP32\n\nAt:\n"
    )
    assert message.endswith(f"  {model_file}(4): auto_complete_config\n;\n")


def test_exception_fails_the_load(server, feature_repository):
    model_file = feature_repository.model_dir("ac_raises") / "1" / "model.py"
    assert load_error(server, "ac_raises") == (
        load_failed("ac_raises") + "RuntimeError: auto-complete exploded\n\nAt:\n"
        f"  {model_file}(4): auto_complete_config\n;\n"
    )


def test_returning_none_fails_the_load(server):
    assert load_error(server, "ac_returns_none") == (
        load_failed("ac_returns_none") + "auto_complete_config function in model "
        "'ac_returns_none' must return a valid pb.ModelConfig object.;\n"
    )
