"""Python-based backends (the original's docs, "Python-based Backends"; NVIDIA's qa
L0_backend_python/python_based_backends): ``backends/pbb_scaler/model.py`` is one runtime
that serves every model whose config says ``backend: "pbb_scaler"``, next to
``backends/python``, the selected backend's own directory. tritonserver finds the runtime
(no ``libtriton_pbb_scaler.so``, so ``backends/pbb_scaler/model.py``, with or without
``runtime: "model.py"`` in the config) and loads ``backends/python/libtriton_python.so`` with
the runtime's directory as the backend's artifacts."""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any

import numpy as np
import pytest

from conformance_support.backends_dir import python_based_backends
from conformance_support.clients import infer, text_output
from conformance_support.control import is_ready, load, load_error, model_config, unload

RUNTIME = pathlib.Path(__file__).resolve().parent / "runtimes" / "pbb_scaler"
X = np.array([1.0, -2.0, 0.25], np.float32)
MODELS = ("pbb_double", "pbb_triple", "pbb_minimal", "pbb_other")


@pytest.fixture(scope="module")
def backends(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    root = tmp_path_factory.mktemp("python_based_backends")
    return python_based_backends(root, {"pbb_scaler": RUNTIME, "pbb_scaler_b": RUNTIME})


@pytest.fixture(scope="module")
def server(feature_repository: Any, backends: pathlib.Path) -> Any:
    with feature_repository.start(model_control_mode="explicit", backend_dir=backends) as srv:
        yield srv


@pytest.fixture
def loaded(server: Any) -> Any:
    """The test loads what it needs; every model is unloaded (stubs gone) after it."""
    yield server
    for name in MODELS:
        unload(server, name)


def scaled(server: Any, model: str, protocol: str = "http", version: str = "") -> np.ndarray:
    return infer(server, protocol, model, {"X": X}, model_version=version).outputs["Y"]


def where(server: Any, model: str, version: str = "") -> dict[str, str]:
    """What the runtime's model.py reports about itself and its model."""
    return json.loads(
        text_output(infer(server, "http", model, {"X": X}, model_version=version), "WHERE")
    )


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_models_of_one_runtime_load_and_unload_independently(loaded, protocol):
    load(loaded, "pbb_double")
    assert not is_ready(loaded, "pbb_triple")
    load(loaded, "pbb_triple")
    # Each model with its own parameters (FACTOR) and each version with its own model.json.
    np.testing.assert_array_equal(scaled(loaded, "pbb_double", protocol, "1"), X * 2)
    np.testing.assert_array_equal(scaled(loaded, "pbb_double", protocol, "2"), X * 2 + 100)
    np.testing.assert_array_equal(scaled(loaded, "pbb_triple", protocol), X * 3)

    unload(loaded, "pbb_double")
    assert not is_ready(loaded, "pbb_double")
    assert is_ready(loaded, "pbb_triple")
    np.testing.assert_array_equal(scaled(loaded, "pbb_triple", protocol), X * 3)

    load(loaded, "pbb_double")
    np.testing.assert_array_equal(scaled(loaded, "pbb_double", protocol, "2"), X * 2 + 100)
    unload(loaded, "pbb_triple")
    np.testing.assert_array_equal(scaled(loaded, "pbb_double", protocol, "1"), X * 2)


@pytest.mark.parametrize("model", ["pbb_double", "pbb_triple"])
def test_the_runtime_is_the_backend_directorys_model_py(loaded, backends, model):
    """Without `runtime` and with `runtime: "model.py"` alike: the module is the backend
    directory's model.py imported as plain `model` (pbb_triple's own 1/model.py, which
    raises on import, is never imported), and the model's paths are the model's."""
    load(loaded, model)
    seen = where(loaded, model, version="1")
    model_dir = loaded.model_repository / model
    assert os.path.realpath(seen.pop("file")) == os.path.realpath(backends / "pbb_scaler/model.py")
    assert seen == {
        "module": "model",
        "model_dir": str(model_dir / "1"),
        "model_repository": str(model_dir),
        "model_name": model,
        "model_version": "1",
    }


def test_the_runtime_completes_a_config_that_names_only_the_backend(loaded):
    load(loaded, "pbb_minimal")
    config = model_config(loaded, "http", "pbb_minimal")
    assert config["backend"] == "pbb_scaler"
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [("X", "TYPE_FP32")]
    assert [(t["name"], t["data_type"]) for t in config["output"]] == [
        ("Y", "TYPE_FP32"),
        ("WHERE", "TYPE_STRING"),
    ]
    np.testing.assert_array_equal(scaled(loaded, "pbb_minimal"), X * -1 + 0.5)


def test_a_config_given_through_the_repository_api(loaded):
    """NVIDIA's qa loads a model of a python-based backend with `load_model(config=...)`."""
    override = {"backend": "pbb_scaler", "parameters": {"FACTOR": {"string_value": "5"}}}
    load(loaded, "pbb_minimal", config=override)
    np.testing.assert_array_equal(scaled(loaded, "pbb_minimal"), X * 5 + 0.5)
    unload(loaded, "pbb_minimal")
    load(loaded, "pbb_minimal")  # the file's config again
    np.testing.assert_array_equal(scaled(loaded, "pbb_minimal"), X * -1 + 0.5)


def test_a_backend_with_neither_library_nor_model_py(loaded):
    message = load_error(loaded, "pbb_minimal", config={"backend": "pbb_nowhere"})
    # tritonserver's own text (the same with either backend).
    assert (
        "unable to find backend library for backend 'pbb_nowhere', try specifying runtime on "
        "the model configuration." in message
    ), message
    assert not is_ready(loaded, "pbb_minimal")


def test_two_runtimes_in_one_server(loaded, backends):
    """Two python-based backends share backends/python's library: each model runs its own
    backend's model.py."""
    load(loaded, "pbb_double")
    load(loaded, "pbb_other")
    for model, runtime, factor in (
        ("pbb_double", "pbb_scaler", 2),
        ("pbb_other", "pbb_scaler_b", 7),
    ):
        seen = where(loaded, model, version="1")
        assert os.path.realpath(seen["file"]) == os.path.realpath(backends / runtime / "model.py")
        np.testing.assert_array_equal(scaled(loaded, model, version="1"), X * factor)
