"""A python-based backend that ships its own copy of the Python backend in its directory
(``backends/pbb_scaler/libtriton_python.so``, with the original's stub and utils, or our
``python_executable``): the original's docs say these artifacts take priority over
``backends/python``'s, so that a runtime can run with another Python. tritonserver loads the
runtime directory's library, which serves the runtime's model.py."""

from __future__ import annotations

import pathlib
from typing import Any

import numpy as np
import pytest

from conformance_support.backends_dir import python_based_backends
from conformance_support.clients import infer
from conformance_support.control import load, unload

RUNTIME = pathlib.Path(__file__).resolve().parent / "runtimes" / "pbb_scaler"


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("own_library")
    return python_based_backends(root, {"pbb_scaler": RUNTIME}, own_library=True)


@pytest.fixture(scope="module")
def server(feature_repository: Any, backends: pathlib.Path) -> Any:
    with feature_repository.start(model_control_mode="explicit", backend_dir=backends) as srv:
        yield srv


def _mapped_libraries(pid: int) -> set[str]:
    maps = pathlib.Path(f"/proc/{pid}/maps").read_text().splitlines()
    return {line.split()[-1] for line in maps if line.endswith("libtriton_python.so")}


def test_the_runtime_directorys_library_serves_its_models(server, backends):
    load(server, "pbb_double")
    try:
        x = np.array([1.0, 2.5], np.float32)
        y = infer(server, "http", "pbb_double", {"X": x}, model_version="1").outputs["Y"]
        np.testing.assert_array_equal(y, x * 2)
        assert str(backends / "pbb_scaler" / "libtriton_python.so") in _mapped_libraries(server.pid)
    finally:
        unload(server, "pbb_double")
