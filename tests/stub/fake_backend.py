"""The stub's tests drive a real stub process through pybackend.testing's StubDriver (a
Python stand-in for libtriton_python.so); these are their helpers around it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Optional

from pybackend.testing.stub_driver import StubDriver as FakeBackend

__all__ = ["FakeBackend", "started", "wait_until", "write_model"]


def write_model(
    repo: Path, name: str, source: str, config: Optional[dict] = None, version: str = "1"
) -> Path:
    """Create ``repo/name/version/model.py``; returns the model file path."""
    vdir = repo / name / version
    vdir.mkdir(parents=True, exist_ok=True)
    model_file = vdir / "model.py"
    model_file.write_text(source)
    return model_file


def started(model_file: Path, instance: str = "m_0_0", **init_kwargs: Any) -> FakeBackend:
    """A stub past HELLO and a successful INIT of ``model_file``."""
    fb = FakeBackend(instance)
    fb.hello()
    reply = fb.init(model_file, **init_kwargs)
    if not reply["ok"]:
        fb.close()
        raise AssertionError(reply["error"])
    return fb


def wait_until(pred: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.01)
    return pred()
