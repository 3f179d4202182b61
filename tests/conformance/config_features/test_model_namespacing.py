"""--model-namespacing: the same python model name in two model repositories. Each copy runs
its own model.py with its own directory, reached through an ensemble of its own repository,
in every PYBACKEND_INSTANCE_PROCESS mode (a process or a fork host must never be shared by
two models that only have the same name), and the bare name is refused as ambiguous.

The repositories are written here: each holds ``m_<mode>`` (2 instances) and an ensemble
``ens_<repo>_<mode>`` over it; the two copies of a model differ only in their factor."""

from __future__ import annotations

import json
import pathlib
import textwrap

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, infer_error, text_output
from conformance_support.launcher import start_server

MODES = ("own", "shared", "fork")
FACTORS = {"a": 2.0, "b": 3.0}

MODEL_PY = """
import json
import os

import numpy as np
import triton_python_backend_utils as pb_utils

FACTOR = {factor}


class TritonPythonModel:
    def initialize(self, args):
        self.where = {{
            "repository": args["model_repository"],
            "instance": args["model_instance_name"],
            "pid": os.getpid(),
        }}

    def execute(self, requests):
        out = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            where = json.dumps(self.where).encode()
            out.append(pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", x * FACTOR),
                pb_utils.Tensor("WHERE", np.array([where], dtype=np.object_)),
            ]))
        return out
"""

IO = """
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_FP32 dims: [ 2 ] } ]
output [
  { name: "OUT" data_type: TYPE_FP32 dims: [ 2 ] },
  { name: "WHERE" data_type: TYPE_STRING dims: [ 1 ] }
]
"""


def python_config(mode: str) -> str:
    config = 'backend: "python"\n' + IO + "instance_group [ { count: 2 kind: KIND_CPU } ]\n"
    if mode != "own":
        config += (
            'parameters { key: "PYBACKEND_INSTANCE_PROCESS" '
            f'value: {{ string_value: "{mode}" }} }}\n'
        )
    return config


def ensemble_config(step: str) -> str:
    return (
        'platform: "ensemble"\n'
        + IO
        + textwrap.dedent(f"""
        ensemble_scheduling {{ step [ {{ model_name: "{step}" model_version: -1
          input_map {{ key: "IN" value: "IN" }}
          output_map {{ key: "OUT" value: "OUT" }}
          output_map {{ key: "WHERE" value: "WHERE" }} }} ] }}
        """)
    )


def write_repository(root: pathlib.Path, repo: str) -> pathlib.Path:
    for mode in MODES:
        model = root / repo / f"m_{mode}"
        (model / "1").mkdir(parents=True)
        (model / "config.pbtxt").write_text(python_config(mode))
        (model / "1" / "model.py").write_text(MODEL_PY.format(factor=FACTORS[repo]))
        ensemble = root / repo / f"ens_{repo}_{mode}"
        (ensemble / "1").mkdir(parents=True)
        (ensemble / "config.pbtxt").write_text(ensemble_config(f"m_{mode}"))
    return root / repo


@pytest.fixture(scope="module")
def repositories(tmp_path_factory):
    root = tmp_path_factory.mktemp("namespacing")
    return {repo: write_repository(root, repo) for repo in FACTORS}


@pytest.fixture(scope="module")
def server(repositories):
    extra = ["--model-namespacing=true", f"--model-repository={repositories['b']}"]
    with start_server(repositories["a"], extra_args=extra) as srv:
        yield srv


def ask(server, protocol: str, model: str) -> tuple[list[float], dict]:
    values = np.array([1.5, -2.0], np.float32)
    result = infer(server, protocol, model, {"IN": values})
    return result.outputs["OUT"].tolist(), json.loads(text_output(result, "WHERE"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_each_namespace_runs_its_own_copy(server, repositories, protocol, mode):
    seen = {}
    for repo, factor in FACTORS.items():
        # Several requests, so that both instances of each copy are likely to answer.
        answers = [ask(server, protocol, f"ens_{repo}_{mode}") for _ in range(6)]
        assert all(out == [1.5 * factor, -2.0 * factor] for out, _ in answers)
        seen[repo] = [where for _, where in answers]
        assert {w["repository"] for w in seen[repo]} == {str(repositories[repo] / f"m_{mode}")}
        assert {w["instance"] for w in seen[repo]} <= {f"m_{mode}_0_0", f"m_{mode}_0_1"}
    pids = {repo: {w["pid"] for w in where} for repo, where in seen.items()}
    assert not pids["a"] & pids["b"], "two models with one name shared a process"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_bare_name_is_ambiguous(server, protocol):
    error = infer_error(server, protocol, "m_own", {"IN": np.zeros(2, np.float32)})
    assert "There are 2 identifiers of model 'm_own' in global map" in error.message
