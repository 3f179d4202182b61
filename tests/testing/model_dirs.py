"""A model directory written for a test: the one way the harness tests write one."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_model(root: Path, name: str, body: str, config: str = "") -> Path:
    """``root/name`` with version 1's model.py ``body`` and config.pbtxt ``config`` (by
    default only the name and the python backend); returns the model's directory."""
    version = root / name / "1"
    version.mkdir(parents=True)
    (version / "model.py").write_text(body)
    (root / name / "config.pbtxt").write_text(config or f'name: "{name}"\nbackend: "python"\n')
    return root / name


def how(text: str) -> dict[str, np.ndarray]:
    """The inputs of a test model that branches on its one string input HOW."""
    return {"HOW": np.array([text.encode()], np.object_)}
