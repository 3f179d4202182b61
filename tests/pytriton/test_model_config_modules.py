"""pybackend.pytriton.model_config has PyTriton's submodules (``common``, ``model_config``,
``tensor``; read from the installed nvidia-pytriton's source), so imports such as
``from pytriton.model_config.common import DynamicBatcher, ModelWarmup`` (the only place
PyTriton 0.7 exports the warmup classes) carry over with the import prefix changed. Each
class PyTriton defines there is ours, with PyTriton's fields first, in PyTriton's order
(ours may add fields after them)."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.util
from pathlib import Path
from typing import Dict, List

import pytest

import pybackend.pytriton.model_config as package

SUBMODULES = ["common", "model_config", "tensor"]


def _classes(submodule: str) -> Dict[str, List[str]]:
    """Public classes of PyTriton's ``pytriton/model_config/<submodule>.py``: their fields."""
    spec = importlib.util.find_spec("pytriton")  # without importing it (its deps are absent)
    assert spec is not None and spec.submodule_search_locations, "nvidia-pytriton is missing"
    root = Path(list(spec.submodule_search_locations)[0])
    tree = ast.parse((root / "model_config" / f"{submodule}.py").read_text())
    return {
        node.name: [
            item.target.id
            for item in node.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        ]
        for node in tree.body
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_")
    }


@pytest.mark.parametrize("submodule", SUBMODULES)
def test_pytriton_submodules_exist_with_its_classes(submodule: str) -> None:
    ours = importlib.import_module(f"pybackend.pytriton.model_config.{submodule}")
    theirs = _classes(submodule)
    assert theirs, f"no classes read from pytriton/model_config/{submodule}.py"
    for name, fields in theirs.items():
        cls = getattr(ours, name)
        assert cls is getattr(package, name)  # one class, whichever path imports it
        if dataclasses.is_dataclass(cls):
            own = [f.name for f in dataclasses.fields(cls)]
            assert own[: len(fields)] == fields, name
