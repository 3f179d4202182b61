"""Helpers shared by the tests that talk to a real tritonserver (clients, leak checks, paths).

Importable as `integration_support` because tests/conftest.py puts tests/ on sys.path
(pytest's default "prepend" import mode).
"""

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
EXAMPLES_REPOSITORY = REPO_ROOT / "examples" / "model_repository"

#: Run as ``[sys.executable, "-c", SIGINT_IGNORED, *command]``: ``command`` starts with SIGINT
#: ignored, as a background job of a script does (exec keeps an ignored signal ignored).
SIGINT_IGNORED = (
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
    "os.execv(sys.argv[1], sys.argv[1:])"
)
