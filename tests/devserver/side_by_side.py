"""tritonserver with our backend beside the development server, on one model repository: the
pair each differential test sends the same requests to, and compares the answers of."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Tuple

import pytest

from pybackend.devserver import DevServer
from pybackend.server import TritonServer

#: The development server's two modes: each model in a stub process, or in this process.
MODES = ["stub", "inprocess"]


@contextmanager
def side_by_side(repo: Path, mode: str) -> Iterator[Tuple[TritonServer, DevServer]]:
    """Both servers on ``repo`` (every endpoint on free ports), stopped on exit."""
    with (
        TritonServer(repo) as real,
        DevServer(
            repo, grpc_port=0, metrics_port=0, in_process=mode == "inprocess", echo_logs=False
        ) as dev,
    ):
        yield real, dev


def copied(factory: pytest.TempPathFactory, label: str, *models: Path) -> Path:
    """A fresh repository holding copies of ``models`` (some write into their directory)."""
    repo = factory.mktemp(label)
    for model in models:
        shutil.copytree(model, repo / model.name)
    return repo
