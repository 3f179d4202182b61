"""The model config parameters the backend reads (csrc/backend/model_state.cc and the
stub), checked by the same code or with the same texts as at load (the one the server
itself refuses, FORCE_CPU_ONLY_INPUT_TENSORS, is utils/config_rules.py's)."""

from __future__ import annotations

import json
import re
from typing import Any, Dict

from ..errors import PybackendError
from ..execution_env import interpreter, locate
from ..stub import async_execute, debug, returns
from ..testing.harness_instances import instance_process_of
from ..utils.config_rules import parameters
from ..utils.errors import TritonModelException
from .config_checks import CONFIG, instance_count
from .findings import ERROR, WARNING, ModelReport, line_of

#: Every parameter the backend or the stub reads; another PYBACKEND_* key is a typo.
KNOWN = {
    "FORCE_CPU_ONLY_INPUT_TENSORS",
    "EXECUTION_ENV_PATH",
    "THREAD_BUDGET",
    "PYBACKEND_DEBUG",
    "PYBACKEND_INSTANCE_PROCESS",
    async_execute.PARAMETER,
    async_execute.CANCEL_PARAMETER,
    returns.STRICT_PARAMETER,
}
THREAD_BUDGET_MAX = 1_000_000  # csrc/backend/thread_budget.cc


def check_parameters(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    params = parameters(config)
    model = report.name

    def add(severity: str, key: str, message: str) -> None:
        report.add(severity, "parameter", message, CONFIG, line_of(text, f'"{key}"'))

    for key in params:
        if key.startswith("PYBACKEND_") and key not in KNOWN:
            known = ", ".join(sorted(k for k in KNOWN if k.startswith("PYBACKEND_")))
            add(WARNING, key, f"parameter {key} is not one pybackend reads ({known})")
    # FORCE_CPU_ONLY_INPUT_TENSORS: config_checks.check_refusals, the harness's rule.
    value = params.get("THREAD_BUDGET")
    if value not in (None, "", "auto", "off") and not _threads(value):
        add(
            ERROR,
            "THREAD_BUDGET",
            f'model \'{model}\': parameter THREAD_BUDGET must be "auto", "off" or a positive '
            f"number of threads per instance, got '{value}'",
        )
    _check_debug(params.get("PYBACKEND_DEBUG", ""), config, model, add)
    try:  # the harness's rule, in the backend's words (csrc/backend/model_state.cc)
        instance_process_of(config, model)
    except TritonModelException as e:
        add(ERROR, "PYBACKEND_INSTANCE_PROCESS", str(e))
    as_json = json.dumps(config)
    decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled"))
    for key, check in (
        (async_execute.PARAMETER, lambda: async_execute.concurrency_limit(as_json, decoupled)),
        (async_execute.CANCEL_PARAMETER, lambda: async_execute.cancel_on_client_cancel(as_json)),
        (returns.STRICT_PARAMETER, lambda: returns.strict_outputs(as_json)),
    ):
        try:
            check()
        except PybackendError as e:
            add(ERROR, key, str(e))
    value = params.get("EXECUTION_ENV_PATH")
    if value:
        value = value.replace("$$TRITON_MODEL_DIRECTORY", str(report.path))
        try:
            path = locate(value, str(report.path))
            if path.is_dir():
                interpreter(path.resolve())
        except PybackendError as e:
            add(ERROR, "EXECUTION_ENV_PATH", f"model '{model}': {e}")


def _threads(value: str) -> bool:
    # As the backend's strtol: leading blanks and a sign pass, nothing may follow.
    return bool(re.fullmatch(r"\s*[+-]?\d+", value)) and 1 <= int(value) <= THREAD_BUDGET_MAX


def _check_debug(value: str, config: Dict[str, Any], model: str, add: Any) -> None:
    if value in ("", "off", "0"):
        return
    try:
        debug.parse(value, f"model '{model}'")
    except PybackendError as e:
        add(ERROR, "PYBACKEND_DEBUG", str(e))
        return
    instances = instance_count(config)
    if instances != 1:
        add(
            ERROR,
            "PYBACKEND_DEBUG",
            f"model '{model}': PYBACKEND_DEBUG={value} debugs one instance, and the "
            f"configuration has {instances}: set instance_group [ {{ count: 1 }} ] while "
            "debugging",
        )
    add(
        WARNING,
        "PYBACKEND_DEBUG",
        f"model '{model}': debug mode (PYBACKEND_DEBUG={value}): no stub or execute "
        "timeouts, so a stub stopped at a breakpoint is not restarted. Not for production.",
    )
