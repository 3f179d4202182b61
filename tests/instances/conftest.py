"""tests/instances: a model's instances in one process (PYBACKEND_INSTANCE_PROCESS, issue 29)."""

from __future__ import annotations

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
# conformance_support.metrics_endpoint reads the metrics endpoint.
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "conformance"))
