"""The configuration a model sees is the one tritonserver hands it, in every engine, for the
fields the server fills in itself (utils/config_rules.server_filled): the model file it runs
(``default_model_filename``), and for a python-based backend's model (a runtime) the
``runtime`` it resolved and a library backend's ``platform``. NVIDIA's PyTorch Python
runtime (``backend: "pytorch"``, ``runtime: "model.py"``: ``backends/pytorch/model.py``)
reads ``default_model_filename`` to find the model's file.

Before, the offline engines ran ``<version>/model.py`` whatever ``default_model_filename``
said (a model whose config names ``impl.py`` failed with "Python model file not found", where
both backends serve it), and gave a runtime's model ``default_model_filename: "model.py"``
and no ``runtime``. The server's answers come from one tritonserver per backend (ours and
NVIDIA's) serving every case at once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, Iterator, Optional, Tuple

import numpy as np
import pytest
import tritonclient.http as http

from pybackend.server import TritonServer
from pybackend.testing import ModelHarness, StubModel

#: Answers the configuration it was given (``args["model_config"]``) as it is.
DUMP = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.config = args["model_config"]

    def execute(self, requests):
        out = np.array([self.config.encode()], np.object_)
        return [  # shaped as X: [1], or [1, 1] where the model batches
            pb_utils.InferenceResponse(
                [pb_utils.Tensor("CONFIG", out.reshape(r.inputs()[0].as_numpy().shape))]
            )
            for r in requests
        ]
"""
IO = """input [{ name: "X" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "CONFIG" data_type: TYPE_STRING dims: [1] }]
"""

#: name: (what config.pbtxt says beside IO, the runtime's name or None for a Python model,
#: the file of the model's version directory, the fields the server fills in).
CASES: Dict[str, Tuple[str, Optional[str], Optional[str], Dict[str, Any]]] = {
    "custom_runtime": (
        'backend: "cfg_rt"',
        "cfg_rt",
        None,
        {"runtime": "model.py", "default_model_filename": "", "platform": ""},
    ),
    "custom_runtime_named": (
        'backend: "cfg_rt"\nruntime: "model.py"',
        "cfg_rt",
        None,
        {"runtime": "model.py", "default_model_filename": ""},
    ),
    "pytorch_runtime": (
        'backend: "pytorch"',
        "pytorch",
        None,
        {
            "runtime": "model.py",
            "default_model_filename": "model.pt",
            "platform": "pytorch_libtorch",
        },
    ),
    # NVIDIA's PyTorch Python runtime's layout: no model file named, so it looks for its own.
    "pytorch_python_runtime": (
        'backend: "pytorch"\nruntime: "model.py"',
        "pytorch",
        None,
        {"default_model_filename": "", "platform": "pytorch_libtorch"},
    ),
    "onnxruntime_runtime": (
        'backend: "onnxruntime"',
        "onnxruntime",
        None,
        {"default_model_filename": "model.onnx", "platform": "onnxruntime_onnx"},
    ),
    "onnxruntime_runtime_group": (
        'backend: "onnxruntime"\ninstance_group [{ kind: KIND_CPU }]',
        "onnxruntime",
        None,
        {"default_model_filename": "model.onnx"},
    ),
    "openvino_runtime": (
        'backend: "openvino"',
        "openvino",
        None,
        {"default_model_filename": "model.xml", "platform": ""},
    ),
    "tensorflow_runtime": (
        'backend: "tensorflow"\nplatform: "tensorflow_savedmodel"',
        "tensorflow",
        None,
        {"default_model_filename": "model.savedmodel"},
    ),
    # A TensorFlow platform names the file whatever the backend.
    "custom_runtime_graphdef": (
        'backend: "cfg_rt"\nplatform: "tensorflow_graphdef"',
        "cfg_rt",
        None,
        {"default_model_filename": "model.graphdef", "runtime": "model.py"},
    ),
    "python_named_file": (
        'backend: "python"\ndefault_model_filename: "impl.py"',
        None,
        "impl.py",
        {"default_model_filename": "impl.py", "runtime": ""},
    ),
    "python_with_a_platform": (
        'backend: "python"\nplatform: "pytorch_libtorch"',
        None,
        "model.py",
        {"default_model_filename": "model.py", "runtime": ""},
    ),
    # The sequence batcher's idle time, and the oldest strategy's preferred batch size.
    "python_sequence": (
        'backend: "python"\nsequence_batching { }',
        None,
        "model.py",
        {"sequence_batching": {"max_sequence_idle_microseconds": 1000000}},
    ),
    "python_sequence_oldest": (
        'backend: "python"\nmax_batch_size: 4\n'
        "sequence_batching { oldest { max_candidate_sequences: 2 } }",
        None,
        "model.py",
        {"sequence_batching.oldest.preferred_batch_size": [4]},
    ),
}
X = {"X": np.ones(1, np.float32)}


def _request(case: str) -> Tuple[Dict[str, np.ndarray], Dict[str, Any]]:
    """The case's inputs (batched where its model batches) and sequence arguments."""
    config = CASES[case][0]
    x = {"X": X["X"].reshape(1, 1)} if "max_batch_size" in config else X
    sequence = {"sequence_id": 1, "sequence_start": True} if "sequence_batching" in config else {}
    return x, sequence


def _field(config: Dict[str, Any], path: str) -> Any:
    """The field at a dotted ``path`` of a configuration, or the part of it a case names."""
    for key in path.split("."):
        config = config[key]
    return config


def _repository(root: Path) -> Tuple[Path, Dict[str, Path]]:
    runtimes: Dict[str, Path] = {}
    for name, (config, runtime, file, _) in CASES.items():
        model = root / "models" / name
        (model / "1").mkdir(parents=True)
        batching = "" if "max_batch_size" in config else "max_batch_size: 0\n"
        (model / "config.pbtxt").write_text(config + "\n" + batching + IO)
        if file is not None:
            (model / "1" / file).write_text(DUMP)
        if runtime is not None and runtime not in runtimes:
            runtimes[runtime] = root / "runtimes" / runtime
            runtimes[runtime].mkdir(parents=True)
            (runtimes[runtime] / "model.py").write_text(DUMP)
    return root / "models", runtimes


def _seen(model: Any, case: str = "") -> Dict[str, Any]:
    x, sequence = _request(case) if case else (X, {})
    return json.loads(model.infer(x, **sequence)["CONFIG"].flat[0])


@pytest.fixture(scope="module")
def served(tmp_path_factory: Any) -> Iterator[Tuple[Path, Dict[str, Path], Dict[str, Any]]]:
    """The repository, its runtimes, and what each backend's server gave each model."""
    models, runtimes = _repository(tmp_path_factory.mktemp("filled"))
    answers: Dict[str, Any] = {}
    for backend in ("ours", "original"):
        with TritonServer(models, backend=backend, runtimes=runtimes) as server:
            client = http.InferenceServerClient(server.http_url.split("://")[-1])
            for name in CASES:
                x, sequence = _request(name)
                given = http.InferInput("X", list(x["X"].shape), "FP32")
                given.set_data_from_numpy(x["X"])
                config = client.infer(name, [given], **sequence).as_numpy("CONFIG").flat[0]
                answers.setdefault(name, {})[backend] = json.loads(config)
    yield models, runtimes, answers


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
@pytest.mark.parametrize("case", list(CASES))
def test_the_model_sees_the_servers_configuration(served: Any, kind: Any, case: str) -> None:
    models, runtimes, answers = served
    config, runtime, _, filled = CASES[case]
    by_server = answers[case]["ours"]
    # The fields the case is about, as the server gave them (2.51, either backend) ...
    for path, value in filled.items():
        part = _field(by_server, path)
        assert (part if not isinstance(value, dict) else {k: part[k] for k in value}) == value
    # ... the same from NVIDIA's backend, and the whole configuration in each engine.
    assert answers[case]["original"] == by_server
    where = runtimes[runtime] if runtime else None
    with kind(models / case, runtime=where) as engine:
        assert _seen(engine, case) == by_server


def test_model_file_still_picks_another_file(tmp_path: Path) -> None:
    """``model_file=`` is a test's own choice of file, over the config's."""
    model = tmp_path / "chosen"
    (model / "1").mkdir(parents=True)
    (model / "config.pbtxt").write_text('backend: "python"\ndefault_model_filename: "a.py"\n' + IO)
    (model / "1" / "b.py").write_text(DUMP)
    with ModelHarness(model, model_file="b.py") as engine:
        assert _seen(engine)["default_model_filename"] == "a.py"


VERSION = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.version = args["model_version"]

    def execute(self, requests):
        out = np.array([self.version.encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("CONFIG", out)]) for _ in requests]
"""


def _versions(root: Path, policy: str) -> Path:
    model = root / "versioned"
    for version in (1, 2, 3):
        (model / str(version)).mkdir(parents=True)
        (model / str(version) / "model.py").write_text(VERSION)
    (model / "config.pbtxt").write_text(f'backend: "python"\nversion_policy: {{ {policy} }}\n{IO}')
    return model


@pytest.mark.parametrize(
    "policy, version",
    [("latest { num_versions: 2 }", b"3"), ("specific { versions: [1, 2] }", b"2")],
)
def test_the_version_run_is_the_one_the_policy_serves(
    tmp_path: Path, policy: str, version: bytes
) -> None:
    """A request that names no version reaches the highest the version policy serves (the
    engines ran the highest on disk, whatever the policy)."""
    from pybackend.testing import ServerModel

    model = _versions(tmp_path, policy)
    for kind in (ServerModel, ModelHarness, StubModel):
        with kind(model) as engine:
            assert engine.infer(X)["CONFIG"][0] == version, kind


def test_a_policy_that_serves_no_version_fails_the_load(tmp_path: Path) -> None:
    from pybackend.server import ServerError
    from pybackend.utils.errors import TritonModelException

    model = _versions(tmp_path, "specific { versions: [7] }")
    text = "at least one version must be available under the version policy of model 'versioned'"
    with pytest.raises(ServerError, match=text):
        TritonServer(model.parent).start()
    for kind in (ModelHarness, StubModel):
        with pytest.raises(TritonModelException, match=text):
            kind(model)
    with ModelHarness(model, version=1) as engine:  # a test's own choice still runs
        assert engine.infer(X)["CONFIG"][0] == b"1"
