"""Explicit model control: version policies, a model that fails to load then loads once
fixed, bytecode in the model repository, user is_ready() on this server (spec 2.1, 2.4, 10)."""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from conformance_support.clients import infer, text_output
from conformance_support.control import is_ready, load, load_error, unload

VERSIONS_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [-1]}],
    "output": [{"name": "WHO", "data_type": "TYPE_STRING", "dims": [1]}],
}
ONE = {"IN": np.array([1], np.int32)}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


@pytest.mark.parametrize(
    "policy,ready",
    [
        (None, [3]),
        ({"latest": {"num_versions": 2}}, [2, 3]),
        ({"specific": {"versions": [1, 3]}}, [1, 3]),
        ({"all": {}}, [1, 2, 3]),
    ],
    ids=["default", "latest2", "specific13", "all"],
)
def test_version_policy(server, feature_repository, policy, ready):
    config = dict(VERSIONS_CONFIG, version_policy=policy) if policy else VERSIONS_CONFIG
    state = feature_repository.model_dir("versions") / "state"
    shutil.rmtree(state, ignore_errors=True)
    load(server, "versions", config)
    try:
        # Only the versions the policy selects were initialized, each in its own process.
        inits = {v: read_state(state, v, "init") for v in (1, 2, 3)}
        assert [v for v in (1, 2, 3) if inits[v] is not None] == ready
        assert [inits[v]["module"] for v in ready] == [f"{v}.model" for v in ready]
        assert len({inits[v]["pid"] for v in ready}) == len(ready)
        assert [v for v in (1, 2, 3) if is_ready(server, "versions", str(v))] == ready
        for version in ready:
            result = infer(server, "http", "versions", ONE, model_version=str(version))
            who = json.loads(text_output(result, "WHO"))
            # Each version is its own module, imported as "<version>.model".
            assert who["version"] == str(version)
            assert who["module"] == f"{version}.model"
            assert result.model_version == str(version)
        latest = json.loads(text_output(infer(server, "grpc", "versions", ONE), "WHO"))
        assert latest["version"] == str(max(ready))
    finally:
        unload(server, "versions")
    # Every loaded version was finalized in the process that initialized it.
    finals = {v: read_state(state, v, "finalize") for v in ready}
    assert {v: f and f["pid"] for v, f in finals.items()} == {v: inits[v]["pid"] for v in ready}


def read_state(state: pathlib.Path, version: int, what: str) -> dict | None:
    """The record the versions model wrote for ``version`` (None when it wrote none)."""
    path = state / f"versions_0.v{version}.{what}.json"
    return json.loads(path.read_text()) if path.exists() else None


FIXED_MODEL = """\
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data + 1)]))
        return responses
"""
LOAD_FAILED = "load failed for model 'broken': version 1 is at UNAVAILABLE state: "


def test_failing_model_loads_once_fixed(server, feature_repository):
    model_file = feature_repository.model_dir("broken") / "1" / "model.py"
    original_source = model_file.read_text()
    try:
        message = load_error(server, "broken")
        assert message == (
            f"{LOAD_FAILED}Internal: RuntimeError: not fixed yet\n\nAt:\n"
            f"  {model_file}(3): initialize\n;\n"
        )
        assert not is_ready(server, "broken")
        model_file.write_text(FIXED_MODEL)
        load(server, "broken")
        assert is_ready(server, "broken")
        result = infer(server, "http", "broken", {"IN": np.array([41], np.int32)})
        assert result.outputs["OUT"].tolist() == [42]
    finally:
        unload(server, "broken")
        model_file.write_text(original_source)


def test_syntax_error_fails_the_load(server, feature_repository):
    model_file = feature_repository.model_dir("broken") / "1" / "model.py"
    original_source = model_file.read_text()
    try:
        model_file.write_text("def broken(:\n")
        message = load_error(server, "broken")
        assert (
            message == f"{LOAD_FAILED}Internal: SyntaxError: invalid syntax (model.py, line 1);\n"
        )
        assert not is_ready(server, "broken")
    finally:
        model_file.write_text(original_source)


def _load_pycache_model(server):
    load(server, "pycache_check")
    try:
        assert infer(server, "http", "pycache_check", ONE).outputs["OUT"].tolist() == [3]
    finally:
        unload(server, "pycache_check")


@pytest.mark.deviation("UV-35: the original writes __pycache__ into the model repository")
def test_no_bytecode_written_into_the_model_repository(server, feature_repository):
    _load_pycache_model(server)
    written = sorted(str(p) for p in feature_repository.path.rglob("__pycache__"))
    assert written == []


@pytest.mark.deviation(
    "pins UV-35: the original writes bytecode next to model.py", backend="original"
)
def test_original_writes_bytecode(server, feature_repository):
    _load_pycache_model(server)
    assert (
        feature_repository.model_dir("pycache_check") / "1" / "helpers" / "__pycache__"
    ).is_dir()


def test_is_ready_is_not_consulted_by_this_server(server, feature_repository):
    """Spec 2.4 (upstream 2026-03): the core asks TRITONBACKEND_ModelInstanceReady, which
    calls the model's is_ready(). The tritonserver 2.51 of the wheel predates that: it never
    looks the entry point up, so with EITHER backend a model whose is_ready() says False
    stays ready and is_ready() is never called (docs/compatibility.md)."""
    model_dir = feature_repository.model_dir("user_ready")
    flag, calls = model_dir / "ready_flag", model_dir / "is_ready_calls"
    calls.unlink(missing_ok=True)
    flag.write_text("no")
    load(server, "user_ready")
    try:
        assert is_ready(server, "user_ready")
        result = infer(server, "http", "user_ready", ONE)
        assert result.outputs["OUT"].tolist() == [1]
        assert not calls.exists(), f"is_ready() was called: {calls.read_text()!r}"
    finally:
        unload(server, "user_ready")
        flag.unlink(missing_ok=True)
        calls.unlink(missing_ok=True)
