"""Conformance suite: the original Python backend's model.py contract, through a real server.

Every feature folder holds ``models/`` (a model repository written the way users of the
ORIGINAL backend write it) and ``test_*.py`` modules that start one real tritonserver per
module. ``PYBACKEND_TEST_BACKEND=ours|original`` picks the backend (default ours).

Marker ``deviation(reason, backend="ours")``: the case pins behaviour where we differ from
the original on purpose (a fixed quirk, a better error). It runs only against the named
backend and is skipped with the reason against the other.
"""

from __future__ import annotations

import pathlib
import sys
from collections.abc import Generator
from typing import Any

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from conformance_support import deferred_stop  # noqa: E402
from conformance_support.backend import selected_backend  # noqa: E402
from conformance_support.launcher import copy_repository, start_server  # noqa: E402


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "deviation(reason, backend='ours'): behaviour where pybackend differs from the original "
        "on purpose; runs only against `backend`, skipped with the reason otherwise",
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    marker = item.get_closest_marker("deviation")
    if marker is None:
        return
    reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
    target = marker.kwargs.get("backend", "ours")
    if target not in ("ours", "original"):
        raise pytest.UsageError(f"deviation marker on {item.nodeid}: bad backend {target!r}")
    if not reason:
        raise pytest.UsageError(f"deviation marker on {item.nodeid} needs a reason")
    if selected_backend() != target:
        pytest.skip(f"deviation ({target} only): {reason}")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(
    fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest
) -> Generator[None, Any, Any]:
    """A module's server fixture may stop its server on a thread (conformance_support.
    deferred_stop): the servers it enters while it is set up are marked so."""
    if fixturedef.scope != "module":
        return (yield)
    with deferred_stop.module_fixture_setup():
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(
    item: pytest.Item, nextitem: pytest.Item | None
) -> Generator[None, None, None]:
    """The suite's last test waits for the servers still stopping, so that whatever runs
    next (other suites, the session's leak check) finds them gone."""
    yield
    here = pathlib.Path(__file__).resolve().parent
    if nextitem is None or here not in pathlib.Path(str(nextitem.path)).parents:
        deferred_stop.wait_for_deferred_stops()


class FeatureRepository:
    """A scratch copy of one feature's ``models/`` and a way to serve it."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path

    def model_dir(self, name: str) -> pathlib.Path:
        return self.path / name

    def start(self, **kwargs: Any) -> Any:
        return start_server(self.path, **kwargs)

    def start_models(self, models: list[str], *, short_exit: bool = False) -> Any:
        """A server that loads only ``models`` (explicit model control). ``short_exit``: a
        2 s exit timeout, for modules that leave requests without a final response: against
        the original they stay in flight and would hold the shutdown for the default 30 s."""
        extra_args = ["--exit-timeout-secs=2"] if short_exit else []
        return self.start(model_control_mode="explicit", load_models=models, extra_args=extra_args)


@pytest.fixture(scope="module")
def feature_repository(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> FeatureRepository:
    """The calling module's ``models/`` folder copied to a fresh scratch directory."""
    models = pathlib.Path(request.module.__file__).resolve().parent / "models"
    scratch = tmp_path_factory.mktemp(models.parent.name)
    return FeatureRepository(copy_repository(models, scratch))
