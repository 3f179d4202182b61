"""A model directory written for a test: the one way the harness tests write one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def write_model(root: Path, name: str, body: str, config: str = "") -> Path:
    """``root/name`` with version 1's model.py ``body`` and config.pbtxt ``config`` (by
    default only the name and the python backend); returns the model's directory."""
    version = root / name / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(body)
    (root / name / "config.pbtxt").write_text(config or f'name: "{name}"\nbackend: "python"\n')
    return root / name


#: The config of a model that reports what its code saw: one FP32 input X, one STRING
#: output SEEN (:func:`seen`).
SEEN_CONFIG = """
name: "{name}"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "SEEN" data_type: TYPE_STRING dims: [ 1 ] }} ]
"""


def seen(model: Any) -> str:
    """What a model of :data:`SEEN_CONFIG` reports, for one request (any engine)."""
    return model.infer({"X": np.ones(1, np.float32)})["SEEN"][0].decode()


def how(text: str) -> dict[str, np.ndarray]:
    """The inputs of a test model that branches on its one string input HOW."""
    return {"HOW": np.array([text.encode()], np.object_)}
