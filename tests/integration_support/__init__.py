"""Helpers shared by the tests that talk to a real tritonserver (clients, leak checks, paths).

Importable as `integration_support` because tests/conftest.py puts tests/ on sys.path
(pytest's default "prepend" import mode).
"""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_REPOSITORY = REPO_ROOT / "examples" / "model_repository"
EXAMPLE_CLIENTS = REPO_ROOT / "examples" / "clients"


def example_client(name: str) -> ModuleType:
    """examples/clients/<name>.py imported as a module (the scripts are no package)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLE_CLIENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: Run as ``[sys.executable, "-c", SIGINT_IGNORED, *command]``: ``command`` starts with SIGINT
#: ignored, as a background job of a script does (exec keeps an ignored signal ignored).
SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
