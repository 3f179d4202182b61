"""Where the deployment checks' tools live: their own environments, made by the Makefile
(`make venv-dist venv-checkov`; `make test` makes them), not .venv."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCKER = REPO / "docker"
MANIFESTS = REPO / "deploy" / "kubernetes"
DIST_BIN = REPO / ".venv-dist" / "bin"
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"
VALIDATOR = Path(__file__).with_name("validate_manifests.py")


def tool(path: Path) -> str:
    assert path.exists(), f"{path} is missing: run `make venv-dist venv-checkov` first"
    return str(path)


def validate(*files: Path) -> list[dict]:
    """One report per YAML document (validate_manifests.py, run in .venv-dist)."""
    done = subprocess.run(
        [tool(DIST_BIN / "python"), str(VALIDATOR), *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def load_yaml(path: Path) -> object:
    """A YAML file as Python data (PyYAML is in .venv-dist, not in .venv)."""
    code = "import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout)"
    done = subprocess.run(
        [tool(DIST_BIN / "python"), "-c", code, str(path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)
