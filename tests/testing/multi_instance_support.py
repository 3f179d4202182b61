"""What the offline harness's and StubModel's multi-instance tests (test_harness_instances.py,
test_stub_instances.py) share: the model's config, its directory, a call that answers which
instance ran it, and calls to several instances at once."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Dict, List

import numpy as np

NAMES = ["inst_0_0", "inst_0_1", "inst_0_2"]


def config(count: int, mode: str = "", **params: str) -> Dict[str, Any]:
    """The `inst` model's config: ``count`` CPU instances under PYBACKEND_INSTANCE_PROCESS
    ``mode`` (the config's default where empty), ``params`` as string parameters."""
    parameters = {k: {"string_value": v} for k, v in params.items()}
    if mode:
        parameters["PYBACKEND_INSTANCE_PROCESS"] = {"string_value": mode}
    return {
        "name": "inst",
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "WAIT", "data_type": "TYPE_INT32", "dims": [1]}],
        "output": [{"name": "OUT", "data_type": "TYPE_STRING", "dims": [1]}],
        "instance_group": [{"count": count, "kind": "KIND_CPU"}],
        "parameters": parameters,
    }


def write_model(root: Path, source: str) -> Path:
    """The `inst` model's directory under ``root``, version 1's model.py ``source``."""
    (root / "inst" / "1").mkdir(parents=True)
    (root / "inst" / "1" / "model.py").write_text(source)
    return root / "inst"


def answer(instance: Any, wait: int = 0) -> Dict[str, Any]:
    """What the instance's execute answers (a JSON object) to WAIT=``wait``."""
    out = instance.infer({"WAIT": np.array([wait], np.int32)})
    return json.loads(out["OUT"][0])


def answer_at_once(instances: List[Any], wait: int, join_s: float) -> List[Any]:
    """Each instance's answer to WAIT=``wait``, all called at once from threads of their
    own; an instance's exception stands in its place (the caller asserts)."""
    results: List[Any] = [None] * len(instances)

    def call(i: int) -> None:
        try:
            results[i] = answer(instances[i], wait=wait)
        except Exception as e:  # noqa: BLE001 - returned, asserted by the caller
            results[i] = e

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(instances))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_s)
    return results
