"""Run the argument matrix (models/argmatrix) in a real tritonserver and return its table.

Also the generator of ``original_table.json``, the ORIGINAL backend's table that the
conformance test compares ours with when the original is not run in the same session:

    .venv/bin/python tests/conformance/argument_validation/matrix_runner.py --write

(needs `make venv-orig`; the test regenerates the table and fails if the file is stale).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shutil
import sys
import tempfile
from typing import Any, Dict

HERE = pathlib.Path(__file__).resolve().parent
TABLE_FILE = HERE / "original_table.json"
MODELS = ("argmatrix", "argtarget", "argprobe", "argvictim")
GENERATE_COMMAND = ".venv/bin/python tests/conformance/argument_validation/matrix_runner.py --write"


# The original aborts now and then on the error paths of its metrics and model control
# (docs/compatibility.md: boost::interprocess::lock_exception); a row it dies in is run again
# in a fresh server. Ours gets no second try: a crash of ours is a failure.
ORIGINAL_TRIES = 4


def add_victim_source(repository: pathlib.Path) -> None:
    """argvictim (what the matrix loads and unloads) answers as argtarget does: its
    models/ folder holds only its config, and the copy gets argtarget's model.py."""
    version = repository / "argvictim" / "1"
    version.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(repository / "argtarget" / "1" / "model.py", version / "model.py")


def run_table(repository: pathlib.Path, backend: str) -> Dict[str, str]:
    """The matrix's outcome table, run by ``backend`` ("ours" or "original") in a fresh
    tritonserver serving ``repository`` (a copy of this folder's ``models/``), one request
    per row."""

    from conformance_support.clients import bytes_input, infer, text_output
    from conformance_support.launcher import BASE_ENV
    from pybackend.server import TritonServer

    add_victim_source(repository)

    def start() -> Any:
        server = TritonServer(
            repository,
            backend=backend,
            env=dict(BASE_ENV),
            ready_timeout=90.0,
            model_control_mode="explicit",
            load_models=MODELS,
        )
        server.__enter__()
        return server

    def ask(server: Any, part: str) -> Any:
        result = infer(server, "http", "argmatrix", {"PART": bytes_input(part)}, client_timeout=120)
        return json.loads(text_output(result, "TABLE"))

    table: Dict[str, str] = {}
    server = start()
    try:
        rows = ask(server, "")
        for row in rows:
            for attempt in range(1, ORIGINAL_TRIES + 1):
                try:
                    table.update(ask(server, row))
                    break
                except Exception as e:  # noqa: BLE001 - the server's death shows in many ways
                    if backend != "original" or attempt == ORIGINAL_TRIES:
                        raise RuntimeError(
                            f"row {row!r} of the matrix failed ({backend}): {e}"
                        ) from e
                    server.__exit__(None, None, None)
                    server = start()
    finally:
        server.__exit__(None, None, None)
    return table


def load_stored() -> Dict[str, Any]:
    stored: Dict[str, Any] = json.loads(TABLE_FILE.read_text())
    return stored


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"rewrite {TABLE_FILE.name}")
    parser.add_argument("--backend", default="original", choices=("ours", "original"))
    args = parser.parse_args()
    sys.path.insert(0, str(HERE.parent))
    with tempfile.TemporaryDirectory() as scratch:
        repository = pathlib.Path(scratch) / "models"
        shutil.copytree(HERE / "models", repository, ignore=shutil.ignore_patterns("__pycache__"))
        table = run_table(repository, args.backend)
    text = json.dumps({"generated_by": GENERATE_COMMAND, "table": table}, indent=1, sort_keys=True)
    if args.write:
        TABLE_FILE.write_text(text + "\n")
        print(f"wrote {len(table)} cells to {TABLE_FILE}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
