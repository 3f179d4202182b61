"""The public pb_utils API type-checks (mypy is in the test extras and `make test`)."""

from __future__ import annotations

from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[2]


def test_mypy_is_clean() -> None:
    targets = [
        "pybackend/utils",
        "pybackend/ipc",
        "pybackend/stub",
        "pybackend/testing",
        "pybackend/pytriton",
        "pybackend/validate",
        "pybackend/cli",
        "pybackend/openai_api",
        "pybackend/errors.py",
        "triton_python_backend_utils.py",
    ]
    out, err, status = api.run(
        ["--ignore-missing-imports", "--no-incremental", *[str(REPO / t) for t in targets]]
    )
    assert status == 0, out + err


def test_package_is_marked_typed() -> None:
    assert (REPO / "pybackend" / "py.typed").is_file()


#: Each engine against the calls it must answer (pybackend/testing/engine.py), and, as the
#: proof that the check can fail, an engine that lacks one call and one that changes one.
ENGINES_SNIPPET = """
from typing import Any, List
from pybackend.testing.engine import Engine, OfflineEngine
from pybackend.testing.harness import ModelHarness
from pybackend.testing.server_model import ServerModel
from pybackend.testing.stub_model import StubModel


class NoStream(ServerModel):
    infer_stream = None  # type: ignore[assignment]


class OtherInfer(ServerModel):
    def infer(  # type: ignore[override]
        self, inputs: Any, *, requested_outputs: List[str] = []
    ) -> Any: ...


def engines(harness: ModelHarness, stub: StubModel, server: ServerModel) -> None:
    in_process: OfflineEngine = harness
    in_stub: OfflineEngine = stub
    served: Engine = server
    offline_server: OfflineEngine = server  # error: no model_dir, no logs...


def broken(a: NoStream, b: OtherInfer) -> None:
    no_stream: Engine = a  # error
    other_infer: Engine = b  # error
"""


def test_each_engine_answers_the_engine_protocol(tmp_path: Path) -> None:
    snippet = tmp_path / "engines.py"
    snippet.write_text(ENGINES_SNIPPET)
    out, err, _ = api.run(["--ignore-missing-imports", "--no-incremental", str(snippet)])
    lines = sorted({int(line.split(":")[1]) for line in out.splitlines() if ": error:" in line})
    expected = [n for n, line in enumerate(ENGINES_SNIPPET.splitlines(), 1) if "# error" in line]
    assert len(expected) == 3
    assert lines == expected, out + err
