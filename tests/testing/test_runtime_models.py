"""A python-based backend's model (docs/python_based_backends.md) in every engine: the model's
config says ``backend: "pbb_scaler"`` and has no model.py of its own; ``runtime=`` names the
backend's directory, whose ``model.py`` runs it (ModelHarness and StubModel import it as a
stub does, ServerModel serves it through tritonserver as ``backends/pbb_scaler``). The
runtime and models are the conformance suite's (tests/conformance/python_based_backends).

Before, the offline engines ran only a model's own ``<version>/model.py``: such a model failed
with "Python model file not found", and ServerModel could not serve it at all."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from pybackend.testing import ModelHarness, ServerModel, StubModel
from pybackend.utils.errors import TritonModelException

CASES = Path(__file__).resolve().parents[1] / "conformance" / "python_based_backends"
RUNTIME = CASES / "runtimes" / "pbb_scaler"
MODELS = CASES / "models"
X = np.array([1.0, -2.0, 0.25], np.float32)
#: What the model's initialize reports that every engine gives alike (its module's name
#: and file differ: a package of the harness's in-process, the server's own backends path).
SAME = ("model_dir", "model_repository", "model_name", "model_version")


def answer(model: Any) -> Dict[str, Any]:
    out = model.infer({"X": X})
    where = json.loads(out["WHERE"][0])
    return {"Y": out["Y"].tolist(), **{k: where[k] for k in SAME}}


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
@pytest.mark.parametrize("model", ["pbb_double", "pbb_minimal"])
def test_the_runtime_runs_the_model_as_the_server_does(kind: Any, model: str) -> None:
    """pbb_double: versions 1 and 2 (the highest runs, reading its own model.json);
    pbb_minimal: inputs and outputs declared by the runtime's auto_complete_config."""
    with ServerModel(MODELS / model, runtime=RUNTIME) as server:
        expected = answer(server)
    version = max(int(p.name) for p in (MODELS / model).iterdir() if p.name.isdigit())
    assert expected["model_dir"] == str(MODELS / model / str(version))
    with kind(MODELS / model, runtime=RUNTIME) as engine:
        assert answer(engine) == expected


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_the_runtime_sees_its_own_directory_on_sys_path_only(kind: Any, tmp_path: Path) -> None:
    """As a stub imports a runtime: its model.py's plain imports come from the runtime's
    directory, and the model's own directories are not searched (a module there with the
    name of the runtime's package does not shadow it)."""
    models = tmp_path / "models"
    shutil.copytree(MODELS / "pbb_double", models / "pbb_double")
    shadow = models / "pbb_double" / "2" / "pbb_rules"
    shadow.mkdir()
    (shadow / "__init__.py").write_text("raise ImportError('the model directory was searched')\n")
    with kind(models / "pbb_double", runtime=RUNTIME) as engine:
        assert engine.infer({"X": X})["Y"].tolist() == [102.0, 96.0, 100.5]


def test_two_models_of_one_runtime_in_one_process_stay_apart() -> None:
    """Each model of a runtime has stub processes of its own: in-process each gets its own
    import of the runtime's model.py, its own parameters, and its own version directory
    from pb_utils.get_model_dir(), also when both run at once."""
    with ModelHarness(MODELS / "pbb_double", runtime=RUNTIME) as double:
        with ModelHarness(MODELS / "pbb_triple", runtime=RUNTIME) as triple:
            assert type(double.model).__module__ != type(triple.model).__module__
            got: Dict[str, Any] = {}

            def ask(name: str, model: Any) -> None:
                got[name] = answer(model)

            threads = [
                threading.Thread(target=ask, args=("double", double)),
                threading.Thread(target=ask, args=("triple", triple)),
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
    assert got["double"]["model_dir"] == str(MODELS / "pbb_double" / "2")
    assert got["triple"]["model_dir"] == str(MODELS / "pbb_triple" / "1")
    assert got["double"]["Y"] != got["triple"]["Y"]


SERVER_TEXT = (
    "unable to find backend library for backend 'pbb_scaler', try specifying runtime on the "
    "model configuration."
)


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_a_runtime_model_without_runtime_is_refused_with_the_servers_text(kind: Any) -> None:
    """tritonserver 2.51 fails the load with SERVER_TEXT when it finds no
    backends/pbb_scaler (test_python_based_backends.py checks it there); every engine says
    the same before it starts, with the fix."""
    with pytest.raises(TritonModelException) as err:
        kind(MODELS / "pbb_double")
    assert str(err.value).startswith(SERVER_TEXT)
    assert "runtime=<the directory of its model.py>" in str(err.value)


@pytest.mark.parametrize("kind", [ModelHarness, StubModel, ServerModel])
def test_runtime_for_a_python_model_or_without_model_py_is_refused(
    kind: Any, tmp_path: Path
) -> None:
    python_model = tmp_path / "plain"
    (python_model / "1").mkdir(parents=True)
    (python_model / "1" / "model.py").write_text("")
    (python_model / "config.pbtxt").write_text('backend: "python"\n')
    with pytest.raises(TritonModelException, match='set backend: "pbb_scaler" in its config'):
        kind(python_model, runtime=RUNTIME)
    empty = tmp_path / "pbb_scaler"
    empty.mkdir()
    with pytest.raises(TritonModelException) as err:
        kind(MODELS / "pbb_double", runtime=empty)
    assert str(err.value).startswith(SERVER_TEXT)
    assert f"no model.py in runtime='{empty}'" in str(err.value)


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_model_of_a_library_backend_is_refused_as_not_python(kind: Any, tmp_path: Path) -> None:
    detector = tmp_path / "detector"
    (detector / "1").mkdir(parents=True)
    (detector / "config.pbtxt").write_text('backend: "onnxruntime"\n')
    with pytest.raises(TritonModelException) as err:
        kind(detector)
    assert str(err.value).startswith(
        "model 'detector' is for backend 'onnxruntime', not Python: the offline engines run "
        "Python models"
    )


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
@pytest.mark.parametrize("mode", ["own", "shared", "fork"])
def test_every_instance_mode_runs_the_runtime(kind: Any, mode: str, tmp_path: Path) -> None:
    """Two instances under each PYBACKEND_INSTANCE_PROCESS: each instance (in a stub, each
    process or host) imports the runtime's model.py as the first does."""
    shutil.copytree(MODELS / "pbb_triple", tmp_path / "pbb_triple")
    config = tmp_path / "pbb_triple" / "config.pbtxt"
    config.write_text(config.read_text().replace("count: 1", "count: 2"))
    with kind(tmp_path / "pbb_triple", runtime=RUNTIME, instances=2, instance_process=mode) as m:
        answers = [answer(instance) for instance in m.instances]
    assert [a["Y"] for a in answers] == [[3.0, -6.0, 0.75]] * 2
    assert {a["model_dir"] for a in answers} == {str(tmp_path / "pbb_triple" / "1")}


def test_a_backends_directory_of_the_callers_own_serves_it_without_runtime(
    tmp_path: Path,
) -> None:
    """ServerModel(backend=<a backends directory>) as an operator lays one out (python and
    the runtime beside it): the server finds the runtime there, nothing is refused."""
    from pybackend.server import our_backend_dir

    backends = tmp_path / "backends"
    backends.mkdir()
    (backends / "python").symlink_to(our_backend_dir() / "python", target_is_directory=True)
    (backends / "pbb_scaler").symlink_to(RUNTIME, target_is_directory=True)
    with ServerModel(MODELS / "pbb_triple", backend=str(backends)) as server:
        assert server.infer({"X": X})["Y"].tolist() == [3.0, -6.0, 0.75]
