"""A model directory as the server reads it: which version's ``model.py`` runs, the model's
name, its configuration (config.pbtxt with the server's defaults) and the first instance's
name. The in-process harness and the stub-process model both start from it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, Optional, Union

from ..utils.errors import TritonModelException
from .config import load_config, normalize


@dataclass
class ModelDir:
    path: Path
    version: int
    version_dir: Path
    model_file: Path
    model_name: str
    config: Dict[str, Any]
    instance_name: str


def resolve(
    model_dir: Union[str, Path],
    *,
    version: Optional[int] = None,
    config: Optional[Dict[str, Any]] = None,
    model_name: Optional[str] = None,
    instance_name: Optional[str] = None,
    model_file: str = "model.py",
) -> ModelDir:
    """``version``: the highest when not given; ``config``: a dict instead of config.pbtxt."""
    path = Path(model_dir).resolve()
    version = version if version is not None else latest_version(path)
    version_dir = path / str(version)
    raw = dict(config) if config is not None else load_config(path)
    name = model_name or raw.get("name") or path.name
    normalized = normalize(raw, name)
    return ModelDir(
        path=path,
        version=version,
        version_dir=version_dir,
        model_file=version_dir / model_file,
        model_name=name,
        config=normalized,
        # The first instance of the first group, named as the server names it.
        instance_name=instance_name or f"{normalized['instance_group'][0]['name']}_0",
    )


def latest_version(model_dir: Path) -> int:
    versions = [int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit()]
    if not versions:
        raise TritonModelException(f"no version directory (e.g. '1/') in '{model_dir}'")
    return max(versions)
