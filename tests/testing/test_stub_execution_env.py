"""A model's EXECUTION_ENV_PATH in a real stub process (StubModel, and so the pytest
plugin's stub mode and the development server): its stubs run in that environment as the
backend starts them, which a test holds to what the real server does."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict

import numpy as np
import pytest

from pybackend.server.locate import original_venv
from pybackend.testing import ServerModel, StubModel
from pybackend.utils.errors import TritonModelException

REPORT = """
import json, os, sys
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        seen = {
            "prefix": sys.prefix,
            "numpy": np.__version__,
            "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV"),
            "PATH": os.environ.get("PATH", "").split(":")[0],
            "PYTHONHOME": os.environ.get("PYTHONHOME"),
            "pb_utils_in_site_packages": "site-packages" in pb_utils.__file__,
        }
        out = np.array([json.dumps(seen).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""


def _model(tmp_path: Path, env_path: str) -> Path:
    model = tmp_path / "report"
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(REPORT)
    (model / "config.pbtxt").write_text(
        'backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]\n'
        'output [ { name: "OUT", data_type: TYPE_STRING, dims: [ 1 ] } ]\n'
        f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{env_path}" }} }}\n'
    )
    return model


def _seen(kind: Any, model_dir: Path) -> Dict[str, Any]:
    with kind(model_dir) as model:
        out = model.infer({"IN": np.zeros(1, np.int32)})["OUT"]
    return json.loads(out.reshape(-1)[0])


def test_the_stub_runs_in_the_models_environment_as_under_the_server(tmp_path: Path) -> None:
    env = original_venv()  # numpy<2, where the server's environment has numpy 2
    model_dir = _model(tmp_path, str(env))
    seen = _seen(StubModel, model_dir)
    assert seen["prefix"] == str(env) and seen["numpy"].startswith("1.")
    assert seen == _seen(ServerModel, model_dir)


@pytest.mark.parametrize("value", ["$$TRITON_MODEL_DIRECTORY/env", "env"])
def test_a_path_in_the_model_directory(tmp_path: Path, value: str) -> None:
    env = original_venv()
    model_dir = _model(tmp_path, value)
    (model_dir / "env").symlink_to(env)  # resolved, as the backend resolves it
    assert _seen(StubModel, model_dir)["VIRTUAL_ENV"] == str(env)


def test_an_explicit_interpreter_wins(tmp_path: Path) -> None:
    import sys

    model_dir = _model(tmp_path, str(original_venv()))
    with StubModel(model_dir, python=sys.executable) as model:
        out = model.infer({"IN": np.zeros(1, np.int32)})["OUT"]
    assert json.loads(out.reshape(-1)[0])["numpy"] == np.__version__


def test_a_missing_environment_fails_the_start_naming_it(tmp_path: Path) -> None:
    model_dir = _model(tmp_path, "/nonexistent/env")
    with pytest.raises(TritonModelException, match="EXECUTION_ENV_PATH '/nonexistent/env'"):
        StubModel(model_dir).start()
