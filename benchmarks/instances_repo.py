"""The model repository of the instances benchmark (issue 29): the two models of
benchmarks/models/instances_*.py under every PYBACKEND_INSTANCE_PROCESS mode.

Each model directory gets the model.py, instances_work.py next to it (the import, weights
and work both models share; model.py imports it as a sibling), a params.json (what to
import, how large the weights are: the import-time model cannot read its config before it
builds them) and a config.pbtxt with ``count`` CPU instances and the mode.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "models"

MODES = ("own", "shared", "fork")

#: What both models share, copied next to each model.py (benchmarks/models/instances_work.py).
WORK = "instances_work.py"

#: What "import torch" stands for where torch is not installed: the heaviest set this
#: environment has (about 830 modules, ~95 MiB RSS and 3-6 s per process on the 2-vCPU
#: machine; torch is ~300-500 MiB and 2-5 s). Measured and named in RESULTS.md.
DEFAULT_HEAVY = (
    "numpy",
    "tritonclient.grpc",
    "tritonclient.http",
    "aiohttp",
    "mypy.build",
    "hypothesis",
    "hypothesis.extra.numpy",
    "pygments.lexers",
    "ml_dtypes",
)

CONFIG = """name: "{name}"
backend: "python"
max_batch_size: 0
input [{{ name: "IDX" data_type: TYPE_INT32 dims: [-1] }}]
output [{{ name: "PERM" data_type: TYPE_INT32 dims: [256] }}]
instance_group [{{ count: {count} kind: KIND_CPU }}]
parameters {{ key: "PYBACKEND_INSTANCE_PROCESS" value: {{ string_value: "{mode}" }} }}
"""


@dataclass(frozen=True)
class BenchModel:
    """One of the two models: where its weights come from, and its model.py."""

    key: str  # "init" or "import"
    title: str
    source: str  # file in benchmarks/models/
    goal_mode: str  # the mode the issue sets targets for on this model


MODELS = (
    BenchModel(
        "init", "weights from pb_utils.shared in initialize", "instances_shared.py", "shared"
    ),
    BenchModel("import", "weights built at import time", "instances_import.py", "fork"),
)


def model_name(model: BenchModel, mode: str) -> str:
    return f"{model.key}_{mode}"


def heavy_modules(spec: str) -> tuple[str, ...]:
    """``--heavy-import``: "default", "none" or a comma list of modules (e.g. "torch")."""
    if spec == "default":
        return DEFAULT_HEAVY
    if spec == "none":
        return ()
    return tuple(m.strip() for m in spec.split(",") if m.strip())


def write_repository(
    root: Path, *, count: int, array_mib: int, heavy: tuple[str, ...]
) -> dict[tuple[str, str], str]:
    """Write every (model, mode); return (model key, mode) -> model name."""
    names = {}
    params = json.dumps({"heavy_import": list(heavy), "array_mib": array_mib})
    for model in MODELS:
        for mode in MODES:
            name = model_name(model, mode)
            version = root / name / "1"
            version.mkdir(parents=True)
            shutil.copyfile(MODELS_DIR / model.source, version / "model.py")
            shutil.copyfile(MODELS_DIR / WORK, version / WORK)
            (version / "params.json").write_text(params)
            config = CONFIG.format(name=name, count=count, mode=mode)
            (root / name / "config.pbtxt").write_text(config)
            names[(model.key, mode)] = name
    return names
