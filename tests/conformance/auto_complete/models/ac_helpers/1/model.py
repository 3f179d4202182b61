import json

import numpy as np

import triton_python_backend_utils as pb_utils

INT_INPUT = {"name": "X", "data_type": "TYPE_INT32", "dims": [1]}
FP_INPUT = {"name": "X", "data_type": "TYPE_FP32", "dims": [1]}


def base(**fields):
    config = {"name": "m", "max_batch_size": 0, "input": [], "output": []}
    config.update(fields)
    return pb_utils.ModelConfig(json.dumps(config))


def scenarios():
    """name -> (ModelConfig, callable taking it)."""
    return {
        "max_batch_lower": (base(max_batch_size=8), lambda c: c.set_max_batch_size(4)),
        "max_batch_higher": (base(max_batch_size=4), lambda c: c.set_max_batch_size(8)),
        "dynamic_new": (base(), lambda c: c.set_dynamic_batching()),
        "dynamic_existing": (
            base(dynamic_batching={"max_queue_delay_microseconds": 5}),
            lambda c: c.set_dynamic_batching(),
        ),
        "dynamic_with_sequence": (
            base(sequence_batching={}),
            lambda c: c.set_dynamic_batching(),
        ),
        "dynamic_with_ensemble": (
            base(ensemble_scheduling={"step": []}),
            lambda c: c.set_dynamic_batching(),
        ),
        "input_new": (base(), lambda c: c.add_input(dict(FP_INPUT, optional=True))),
        "input_extra_key": (base(), lambda c: c.add_input(dict(FP_INPUT, format="FORMAT_NONE"))),
        "input_missing_name": (
            base(),
            lambda c: c.add_input({"data_type": "TYPE_FP32", "dims": [1]}),
        ),
        "input_missing_data_type": (base(), lambda c: c.add_input({"name": "X", "dims": [1]})),
        "input_missing_dims": (
            base(),
            lambda c: c.add_input({"name": "X", "data_type": "TYPE_FP32"}),
        ),
        "input_conflict_dtype": (base(input=[INT_INPUT]), lambda c: c.add_input(FP_INPUT)),
        "input_conflict_dims": (
            base(input=[INT_INPUT]),
            lambda c: c.add_input(dict(INT_INPUT, dims=[2, 3])),
        ),
        "input_conflict_optional": (
            base(input=[dict(INT_INPUT, optional=False)]),
            lambda c: c.add_input(dict(INT_INPUT, optional=True)),
        ),
        "input_fills_invalid": (
            base(input=[{"name": "X", "data_type": "TYPE_INVALID", "dims": []}]),
            lambda c: c.add_input(FP_INPUT),
        ),
        "input_same": (base(input=[INT_INPUT]), lambda c: c.add_input(INT_INPUT)),
        "output_new": (base(), lambda c: c.add_output(FP_INPUT)),
        "output_extra_key": (base(), lambda c: c.add_output(dict(FP_INPUT, optional=True))),
        "output_missing_dims": (
            base(),
            lambda c: c.add_output({"name": "X", "data_type": "TYPE_FP32"}),
        ),
        "output_conflict_dtype": (base(output=[INT_INPUT]), lambda c: c.add_output(FP_INPUT)),
        "output_conflict_dims": (
            base(output=[INT_INPUT]),
            lambda c: c.add_output(dict(INT_INPUT, dims=[4])),
        ),
        "policy_new": (base(), lambda c: c.set_model_transaction_policy({"decoupled": True})),
        "policy_extra_key": (
            base(),
            lambda c: c.set_model_transaction_policy({"decoupled": True, "other": 1}),
        ),
        "policy_change": (
            base(model_transaction_policy={"decoupled": False}),
            lambda c: c.set_model_transaction_policy({"decoupled": True}),
        ),
        "policy_same": (
            base(model_transaction_policy={"decoupled": True}),
            lambda c: c.set_model_transaction_policy({"decoupled": True}),
        ),
        "as_dict_is_live": (base(), lambda c: c.as_dict().__setitem__("max_batch_size", 3)),
    }


def run(config, action):
    try:
        action(config)
    except Exception as exc:  # noqa: BLE001 - the test checks which exception
        return f"{type(exc).__name__}:{exc}"
    return "ok:" + json.dumps(config._model_config, sort_keys=True)


class TritonPythonModel:
    def execute(self, requests):
        results = {name: run(*case) for name, case in scenarios().items()}
        encoded = np.array([json.dumps(results).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULTS", encoded)]) for _ in requests]
