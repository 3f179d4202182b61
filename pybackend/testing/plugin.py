"""pytest plugin (entry point ``pytest11``): the ``triton_model`` fixture opens a model
directory in-process (:class:`ModelHarness`), in a real stub process (:class:`StubModel`) or
through a real tritonserver (:class:`ServerModel`), so one test covers all three:

    def test_add_sub(triton_model):
        model = triton_model("model_repository/add_sub")
        assert model.infer({"INPUT0": a, "INPUT1": b})["OUTPUT0"].tolist() == [...]

``pytest --pybackend-mode=inprocess,stub,server`` runs every such test in each mode
(default: in-process only; ``server`` needs the ``server`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterator, List, Sequence, Union

import pytest

from .engine import Engine
from .harness import ModelHarness
from .server_model import ServerModel
from .stub_model import StubModel

MODES = ("inprocess", "stub", "server")


def pytest_addoption(parser: Any) -> None:
    parser.addoption(
        "--pybackend-mode",
        default="inprocess",
        help="where the triton_model fixture runs models: inprocess, stub, server, or "
        "several comma-separated (default: inprocess)",
    )


def _modes(config: Any) -> List[str]:
    return [m.strip() for m in config.getoption("--pybackend-mode").split(",")]


def pytest_configure(config: Any) -> None:
    unknown = [m for m in _modes(config) if m not in MODES]
    if unknown:
        raise pytest.UsageError(f"--pybackend-mode: unknown {unknown}, choose from {MODES}")


def pytest_generate_tests(metafunc: Any) -> None:
    if "pybackend_mode" in metafunc.fixturenames and not _parametrized(metafunc):
        metafunc.parametrize("pybackend_mode", _modes(metafunc.config))


def _parametrized(metafunc: Any) -> bool:
    markers = metafunc.definition.iter_markers("parametrize")
    return any("pybackend_mode" in m.args[0] for m in markers)


@pytest.fixture
def triton_model(pybackend_mode: str) -> Iterator[Callable[..., Any]]:
    """``triton_model(model_dir, others=(), **kwargs)``: the model, started; ``others`` are
    served beside it (the models it calls through BLS). ``kwargs`` go to ModelHarness
    (in-process), StubModel or ServerModel."""
    opened: List[Any] = []

    def open_model(
        model_dir: Union[str, Path], *, others: Sequence[Union[str, Path]] = (), **kwargs: Any
    ) -> Any:
        if pybackend_mode == "server":
            model: Engine = ServerModel(model_dir, others=others, **kwargs)
        else:
            kind = StubModel if pybackend_mode == "stub" else ModelHarness
            for other in others:
                opened.append(kind(other).start())
            model = kind(model_dir, **kwargs)
        opened.append(model.start())
        return model

    try:
        yield open_model
    finally:
        for model in reversed(opened):
            model.close()
