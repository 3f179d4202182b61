"""PyTriton's decorators and callable contract inside a plain model.py (CallableAdapter),
run by the offline harness, which calls the stub's own code."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pybackend.testing import ModelHarness

MODEL = """
import numpy as np
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.python_model import CallableAdapter


@batch
def infer(x):
    return [x * 2, x.sum(axis=1, keepdims=True)]  # a list: in the order of the outputs


class TritonPythonModel:
    def initialize(self, args):
        self.adapter = CallableAdapter(infer, args["model_config"])

    def execute(self, requests):
        return self.adapter.execute(requests)
"""

CONFIG = {
    "max_batch_size": 8,
    "dynamic_batching": {},
    "input": [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1]}],
    "output": [
        {"name": "double", "data_type": "TYPE_FP32", "dims": [-1]},
        {"name": "total", "data_type": "TYPE_FP32", "dims": [1]},
    ],
}


def test_decorated_callable_in_a_model_py(tmp_path: Path) -> None:
    (tmp_path / "1").mkdir()
    (tmp_path / "1" / "model.py").write_text(MODEL)
    with ModelHarness(tmp_path, config=CONFIG) as model:
        a = np.array([[1, 2]], np.float32)
        b = np.array([[3, 4], [5, 6]], np.float32)
        first, second = model.infer_batch([{"x": a}, {"x": b}])
    np.testing.assert_array_equal(first["double"], a * 2)
    np.testing.assert_array_equal(second["total"], [[7], [11]])
