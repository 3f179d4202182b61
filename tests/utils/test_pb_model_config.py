"""pb_utils.ModelConfig and its exact ValueError texts."""

# ruff: noqa: E501 - exact upstream messages stay on one line so they can be grepped for

from __future__ import annotations

import json

import pytest

import triton_python_backend_utils as pb_utils


def cfg(**kw) -> pb_utils.ModelConfig:
    base = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    base.update(kw)
    return pb_utils.ModelConfig(json.dumps(base))


def err(fn) -> str:
    with pytest.raises(ValueError) as e:
        fn()
    return str(e.value)


def test_as_dict_is_live() -> None:
    c = cfg()
    c.as_dict()["x"] = 1
    assert c._model_config["x"] == 1
    assert pb_utils.ModelConfig({"name": "d"}).as_dict() == {"name": "d"}


def test_max_batch_size() -> None:
    c = cfg(max_batch_size=4)
    c.set_max_batch_size(8)
    assert c.as_dict()["max_batch_size"] == 8
    assert err(lambda: c.set_max_batch_size(2)) == (
        "configuration specified max_batch_size 8, but in auto-complete-config function for model 'm' "
        "specified max_batch_size 2"
    )


def test_dynamic_batching() -> None:
    c = cfg()
    c.set_dynamic_batching()
    assert c.as_dict()["dynamic_batching"] == {}
    c.as_dict()["dynamic_batching"] = {"max_queue_delay_microseconds": 5}
    c.set_dynamic_batching()
    assert c.as_dict()["dynamic_batching"] == {"max_queue_delay_microseconds": 5}
    for other in ("sequence_batching", "ensemble_scheduling"):
        assert err(lambda o=other: cfg(**{o: {}}).set_dynamic_batching()) == (
            f"Configuration specified scheduling_choice as '{other}', but auto-complete-config function "
            "for model 'm' tries to set scheduling_choice as 'dynamic_batching'"
        )


def test_add_input_output() -> None:
    c = cfg()
    c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [4], "optional": True})
    c.add_output({"name": "O", "data_type": "TYPE_INT32", "dims": [-1]})
    assert pb_utils.get_input_config_by_name(c.as_dict(), "I")["optional"] is True
    assert pb_utils.get_output_config_by_name(c.as_dict(), "O")["dims"] == [-1]
    assert pb_utils.get_input_config_by_name(c.as_dict(), "O") is None
    # Same name: filled in when the existing entry is compatible.
    c = cfg(input=[{"name": "I", "data_type": "TYPE_INVALID", "dims": []}])
    c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [2]})
    assert c.as_dict()["input"] == [{"name": "I", "data_type": "TYPE_FP32", "dims": [2]}]


def test_add_input_errors() -> None:
    c = cfg(input=[{"name": "I", "data_type": "TYPE_FP32", "dims": [4], "optional": False}])
    assert err(
        lambda: c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [4], "x": 1})
    ) == (
        "input 'I' in auto-complete-config function for model 'm' contains property other than "
        "'name', 'data_type', 'dims' and 'optional'."
    )
    assert err(lambda: c.add_input({"data_type": "TYPE_FP32", "dims": [4]})) == (
        "input in auto-complete-config function for model 'm' is missing 'name' property."
    )
    assert err(lambda: c.add_input({"name": "I", "dims": [4]})) == (
        "input 'I' in auto-complete-config function for model 'm' is missing 'data_type' property."
    )
    assert err(lambda: c.add_input({"name": "I", "data_type": "TYPE_FP32"})) == (
        "input 'I' in auto-complete-config function for model 'm' is missing 'dims' property."
    )
    assert err(lambda: c.add_input({"name": "I", "data_type": "TYPE_INT8", "dims": [4]})) == (
        "unable to load model 'm', configuration expects datatype TYPE_FP32 for input 'I', model provides TYPE_INT8"
    )
    assert err(lambda: c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [5]})) == (
        "model 'm', tensor 'I': the model expects dims [5] but the model configuration specifies dims [4]"
    )
    assert err(
        lambda: c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [4], "optional": True})
    ) == (
        "model 'm', tensor 'I': the model expects optional True but the model configuration specifies optional False"
    )


def test_add_output_errors() -> None:
    c = cfg()
    assert err(
        lambda: c.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [4], "optional": True})
    ) == (
        "output 'O' in auto-complete-config function for model 'm' contains property other than "
        "'name', 'data_type' and 'dims'."
    )


def test_transaction_policy() -> None:
    c = cfg()
    c.set_model_transaction_policy({"decoupled": True})
    assert pb_utils.using_decoupled_model_transaction_policy(c.as_dict()) is True
    c.set_model_transaction_policy({"decoupled": True})
    assert err(lambda: c.set_model_transaction_policy({"decoupled": False})) == (
        "trying to change decoupled property in auto-complete-config for model 'm', which is already set to 'True'."
    )
    assert err(lambda: c.set_model_transaction_policy({"other": 1})) == (
        "model transaction property in auto-complete-config function for model 'm' contains property "
        "other than 'decoupled'."
    )
    assert pb_utils.using_decoupled_model_transaction_policy({}) is False
