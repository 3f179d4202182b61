"""Which versions of a model tritonserver serves: the numbered directories of the model on
disk that its ``version_policy`` picks (the latest one by default). One rule for the offline
engines (the version they run: the highest served, where a request that names none goes)
and `pybackend validate` (a model the policy leaves without a version fails its load)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List, Mapping


def versions(model_dir: Path) -> List[int]:
    """The version directories on disk, in order."""
    return sorted(int(p.name) for p in model_dir.iterdir() if p.is_dir() and p.name.isdigit())


def served_versions(model_dir: Path, config: Mapping[str, Any]) -> List[int]:
    """The versions the version policy picks among those on disk (latest 1 by default)."""
    there = versions(model_dir)
    policy = config.get("version_policy") or {}
    if "all" in policy:
        return there
    if "specific" in policy:
        wanted = {int(v) for v in policy["specific"].get("versions", [])}
        return [v for v in there if v in wanted]
    latest = int((policy.get("latest") or {}).get("num_versions") or 1)
    return there[-latest:] if there else []


def no_served_version_text(model_name: str) -> str:
    """tritonserver's refusal of a model whose policy picks no version on disk."""
    return (
        f"at least one version must be available under the version policy of model '{model_name}'"
    )
