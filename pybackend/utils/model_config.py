"""``pb_utils.ModelConfig``: what ``auto_complete_config`` receives and returns. The
ValueError texts are the ones Triton users see in load failures."""

from __future__ import annotations

import json
from typing import Any, Dict, Union

_INPUT_KEYS = ("name", "data_type", "dims", "optional")
_OUTPUT_KEYS = ("name", "data_type", "dims")


class ModelConfig:
    """Wraps the model configuration (as Triton's JSON) for auto-completion."""

    def __init__(self, model_config: Union[str, bytes, Dict[str, Any]]) -> None:
        self._model_config: Dict[str, Any] = (
            model_config if isinstance(model_config, dict) else json.loads(model_config)
        )

    def _name(self) -> str:
        return str(self._model_config.get("name", ""))

    def as_dict(self) -> Dict[str, Any]:
        """The underlying dictionary (live, not a copy)."""
        return self._model_config

    def set_max_batch_size(self, max_batch_size: int) -> None:
        current = self._model_config.get("max_batch_size", 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but in auto-complete-config "
                f"function for model '{self._name()}' specified max_batch_size {max_batch_size}"
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        for other in ("sequence_batching", "ensemble_scheduling"):
            if other in self._model_config:
                raise ValueError(
                    f"Configuration specified scheduling_choice as '{other}', but "
                    f"auto-complete-config function for model '{self._name()}' tries to set "
                    "scheduling_choice as 'dynamic_batching'"
                )
        if "dynamic_batching" not in self._model_config:
            self._model_config["dynamic_batching"] = {}

    def _add_tensor(self, kind: str, tensor: Any, allowed: tuple, allowed_text: str) -> None:
        model = self._name()
        if not isinstance(tensor, dict):
            raise ValueError(
                f"{kind} in auto-complete-config function for model '{model}' must be a dict, "
                f"found type {type(tensor)}"
            )
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    f"{kind} '{tensor.get('name', '')}' in auto-complete-config function for model "
                    f"'{model}' contains property other than {allowed_text}."
                )
        if "name" not in tensor:
            raise ValueError(
                f"{kind} in auto-complete-config function for model '{model}' is missing "
                "'name' property."
            )
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(
                    f"{kind} '{tensor['name']}' in auto-complete-config function for model "
                    f"'{model}' is missing '{key}' property."
                )
        existing_list = self._model_config.setdefault(kind, [])
        for current in existing_list:
            if current.get("name") != tensor["name"]:
                continue
            cur_type = current.get("data_type", "TYPE_INVALID")
            cur_dims = current.get("dims", [])
            if cur_type != "TYPE_INVALID" and cur_type != tensor["data_type"]:
                raise ValueError(
                    f"unable to load model '{model}', configuration expects datatype {cur_type} "
                    f"for {kind} '{tensor['name']}', model provides {tensor['data_type']}"
                )
            if cur_dims and cur_dims != tensor["dims"]:
                raise ValueError(
                    f"model '{model}', tensor '{tensor['name']}': the model expects dims "
                    f"{tensor['dims']} but the model configuration specifies dims {cur_dims}"
                )
            if (
                "optional" in current
                and "optional" in tensor
                and current["optional"] != tensor["optional"]
            ):
                raise ValueError(
                    f"model '{model}', tensor '{tensor['name']}': the model expects optional "
                    f"{tensor['optional']} but the model configuration specifies optional "
                    f"{current['optional']}"
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        existing_list.append(tensor)

    def add_input(self, input: Dict[str, Any]) -> None:  # noqa: A002 - upstream's name
        self._add_tensor("input", input, _INPUT_KEYS, "'name', 'data_type', 'dims' and 'optional'")

    def add_output(self, output: Dict[str, Any]) -> None:
        self._add_tensor("output", output, _OUTPUT_KEYS, "'name', 'data_type' and 'dims'")

    def set_model_transaction_policy(self, transaction_policy_dict: Dict[str, Any]) -> None:
        model = self._name()
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    f"model transaction property in auto-complete-config function for model "
                    f"'{model}' contains property other than 'decoupled'."
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            new = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != new:
                raise ValueError(
                    f"trying to change decoupled property in auto-complete-config for model "
                    f"'{model}', which is already set to '{policy['decoupled']}'."
                )
            policy["decoupled"] = new

    def __repr__(self) -> str:
        return f"ModelConfig({json.dumps(self._model_config)})"
