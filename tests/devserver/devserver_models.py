"""What the development server's tests share: its two modes and the model directories they
write."""

from __future__ import annotations

import shutil
from pathlib import Path

from integration_support import EXAMPLES_REPOSITORY

#: DevServer(in_process=mode == "inprocess"): a stub process per instance, or none.
MODES = ["stub", "inprocess"]


def copy_model(name: str, repository: Path) -> None:
    """The example repository's model ``name`` copied into ``repository``."""
    shutil.copytree(EXAMPLES_REPOSITORY / name, repository / name)


def write_model(repository: Path, name: str, source: str) -> None:
    """Model ``name`` with model.py ``source``: FP32 INPUT0 in, FP32 OUTPUT0 out."""
    (repository / name / "1").mkdir(parents=True)
    (repository / name / "1" / "model.py").write_text(source)
    (repository / name / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
        'output [ { name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] } ]\n'
    )
