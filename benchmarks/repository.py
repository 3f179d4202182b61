"""Model repositories for the benchmark: one per backend kind, written into a temp dir.

The Python backends (ours and the original) get the very same `model.py` files from
`benchmarks/models/`, written as a user would write them. The native floor gets the same
configs with `backend: "identity_native"` and a `mode` parameter instead of Python code.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

MODELS_DIR = Path(__file__).resolve().parent / "models"
NATIVE_BACKEND = "identity_native"

FP32_2D = (
    'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [-1, -1] }]\n'
    'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [-1, -1] }]\n'
)
BYTES_1D = (
    'input [{ name: "INPUT0" data_type: TYPE_STRING dims: [-1] }]\n'
    'output [{ name: "OUTPUT0" data_type: TYPE_STRING dims: [-1] }]\n'
)


@dataclass(frozen=True)
class ModelSpec:
    """One model: its name, the model.py it runs, its config body and native mode."""

    name: str
    source: str  # file in benchmarks/models/
    config: str  # config.pbtxt without the backend line
    native_mode: str | None = "identity"  # None: the native floor has no equivalent
    instances: int = 1


MODELS: tuple[ModelSpec, ...] = (
    ModelSpec("identity", "identity.py", "max_batch_size: 0\n" + FP32_2D),
    ModelSpec("identity_2inst", "identity.py", "max_batch_size: 0\n" + FP32_2D, instances=2),
    ModelSpec("fresh", "fresh.py", "max_batch_size: 0\n" + FP32_2D),
    ModelSpec(
        "identity_batch",
        "identity.py",
        "max_batch_size: 64\ndynamic_batching { }\n"
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [16] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [16] }]\n',
    ),
    ModelSpec(
        "add_sub",
        "add_sub.py",
        "max_batch_size: 0\n"
        'input [{ name: "INPUT0" data_type: TYPE_FP32 dims: [4] },'
        ' { name: "INPUT1" data_type: TYPE_FP32 dims: [4] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [4] },'
        ' { name: "OUTPUT1" data_type: TYPE_FP32 dims: [4] }]\n',
        native_mode="add_sub",
    ),
    ModelSpec("bytes_echo", "identity.py", "max_batch_size: 0\n" + BYTES_1D),
    ModelSpec(
        "bytes_decode",
        "bytes_decode.py",
        "max_batch_size: 0\n"
        'input [{ name: "INPUT0" data_type: TYPE_STRING dims: [-1] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_INT64 dims: [1] }]\n',
        native_mode="decode",
    ),
    ModelSpec("bls", "bls.py", "max_batch_size: 0\n" + FP32_2D, native_mode=None),
    ModelSpec("bls_target", "identity.py", "max_batch_size: 0\n" + FP32_2D, native_mode=None),
    ModelSpec(
        "decoupled",
        "decoupled.py",
        "max_batch_size: 0\nmodel_transaction_policy { decoupled: true }\n"
        'input [{ name: "INPUT0" data_type: TYPE_INT32 dims: [1] }]\n'
        'output [{ name: "OUTPUT0" data_type: TYPE_INT32 dims: [1] }]\n',
        native_mode="decoupled",
    ),
)


def _config_text(spec: ModelSpec, native: bool) -> str:
    backend = NATIVE_BACKEND if native else "python"
    text = f'name: "{spec.name}"\nbackend: "{backend}"\n{spec.config}'
    text += f"instance_group [{{ count: {spec.instances} kind: KIND_CPU }}]\n"
    if native:
        text += f'parameters {{ key: "mode" value: {{ string_value: "{spec.native_mode}" }} }}\n'
    return text


def write_model(root: Path, spec: ModelSpec, native: bool) -> None:
    model_dir = root / spec.name
    (model_dir / "1").mkdir(parents=True, exist_ok=True)
    (model_dir / "config.pbtxt").write_text(_config_text(spec, native))
    if not native:
        shutil.copyfile(MODELS_DIR / spec.source, model_dir / "1" / "model.py")


def write_repository(root: Path, native: bool, names: tuple[str, ...] | None = None) -> list[str]:
    """Write the models (all, or those named) into root; return the names written."""
    root.mkdir(parents=True, exist_ok=True)
    written = []
    for spec in MODELS:
        if names is not None and spec.name not in names:
            continue
        if native and spec.native_mode is None:
            continue
        write_model(root, spec, native)
        written.append(spec.name)
    return written
