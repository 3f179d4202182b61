"""Instances, initialize args, finalize on unload and reload (spec 2.1, 2.3, 2.5).

The ``probe`` model records each instance's initialize args and finalize call as JSON files
under ``<model dir>/state/``; tests load it with config overrides (explicit model control).
"""

from __future__ import annotations

import json
import pathlib
import shutil

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output
from conformance_support.control import load, unload, wait_for

BASE_CONFIG = {
    "backend": "python",
    "max_batch_size": 0,
    "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [-1]}],
    "output": [{"name": "WHO", "data_type": "TYPE_STRING", "dims": [1]}],
}
ARG_KEYS = {
    "model_config",
    "model_instance_kind",
    "model_instance_name",
    "model_instance_device_id",
    "model_repository",
    "model_version",
    "model_name",
}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit") as srv:
        yield srv


@pytest.fixture
def probe(server, feature_repository):
    """A clean state dir; the probe model is unloaded again after the test."""
    model_dir = feature_repository.model_dir("probe")
    shutil.rmtree(model_dir / "state", ignore_errors=True)
    yield model_dir
    unload(server, "probe")


def records(model_dir: pathlib.Path, kind: str) -> dict[str, dict]:
    state = model_dir / "state"
    suffix = f".{kind}.json"
    if not state.is_dir():
        return {}
    return {
        p.name[: -len(suffix)]: json.loads(p.read_text())
        for p in state.iterdir()
        if p.name.endswith(suffix)
    }


def config_with(instance_group: list[dict]) -> dict:
    return dict(BASE_CONFIG, instance_group=instance_group)


def test_instance_groups_give_one_process_per_instance(server, probe):
    groups = [{"count": 2, "kind": "KIND_CPU"}, {"count": 1, "kind": "KIND_CPU"}]
    load(server, "probe", config_with(groups))
    inits = records(probe, "init")
    assert sorted(inits) == ["probe_0_0", "probe_0_1", "probe_1_0"]
    assert len({r["pid"] for r in inits.values()}) == 3, "each instance has its own stub process"
    for name, record in inits.items():
        assert record["args"]["model_instance_name"] == name
        assert record["args"]["model_instance_kind"] == "CPU"
        assert record["args"]["model_instance_device_id"] == "0"


def test_named_instance_group(server, probe):
    load(server, "probe", config_with([{"name": "named", "count": 2, "kind": "KIND_CPU"}]))
    assert sorted(records(probe, "init")) == ["named_0", "named_1"]


def test_initialize_args(server, probe, feature_repository):
    """Exactly the seven keys of spec 2.1, all str values, in a dict."""
    load(server, "probe")
    (record,) = records(probe, "init").values()
    args = record["args"]
    assert record["args_type"] == "dict"
    assert set(args) == ARG_KEYS
    assert record["value_types"] == ["str"]
    assert args["model_name"] == "probe"
    assert args["model_version"] == "1"
    assert args["model_repository"] == str(feature_repository.model_dir("probe"))
    assert args["model_instance_kind"] == "CPU"
    assert args["model_instance_device_id"] == "0"
    config = json.loads(args["model_config"])
    assert config["name"] == "probe"
    assert config["backend"] == "python"
    assert config["input"][0]["data_type"] == "TYPE_INT32"
    assert config["input"][0]["dims"] == [-1]
    assert config["instance_group"][0]["kind"] == "KIND_CPU"
    assert config["instance_group"][0]["count"] == 1
    assert record["module"] == "1.model"


def test_model_config_json_is_normalized(server, probe):
    """The core fills in every field (e.g. optional, format) and passes parameters as
    {"key": {"string_value": ...}}."""
    config = dict(BASE_CONFIG, parameters={"MY_KEY": {"string_value": "my value"}})
    load(server, "probe", config)
    (record,) = records(probe, "init").values()
    seen = json.loads(record["args"]["model_config"])
    assert seen["parameters"] == {"MY_KEY": {"string_value": "my value"}}
    assert seen["input"][0]["optional"] is False
    assert seen["input"][0]["format"] == "FORMAT_NONE"
    assert seen["max_batch_size"] == 0


def test_kind_model(server, probe):
    load(server, "probe", config_with([{"count": 1, "kind": "KIND_MODEL"}]))
    (record,) = records(probe, "init").values()
    assert record["args"]["model_instance_kind"] == "MODEL"
    assert record["args"]["model_instance_device_id"] == "0"


def _has_gpu() -> bool:
    return pathlib.Path("/dev/nvidia0").exists() or pathlib.Path("/dev/nvidiactl").exists()


@pytest.mark.skipif(not _has_gpu(), reason="KIND_GPU needs an NVIDIA GPU")
def test_kind_gpu(server, probe):
    load(server, "probe", config_with([{"count": 1, "kind": "KIND_GPU", "gpus": [0]}]))
    (record,) = records(probe, "init").values()
    assert record["args"]["model_instance_kind"] == "GPU"
    assert record["args"]["model_instance_device_id"] == "0"


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_requests_reach_the_instances(server, probe, protocol):
    load(server, "probe", config_with([{"count": 2, "kind": "KIND_CPU"}]))
    inits = records(probe, "init")
    result = infer(server, protocol, "probe", {"IN": np.array([1], np.int32)})
    who = json.loads(text_output(result, "WHO"))
    assert who["instance"] in inits
    assert who["pid"] == inits[who["instance"]]["pid"]


def test_finalize_runs_on_unload(server, feature_repository):
    model_dir = feature_repository.model_dir("probe")
    shutil.rmtree(model_dir / "state", ignore_errors=True)
    load(server, "probe", config_with([{"count": 2, "kind": "KIND_CPU"}]))
    assert records(model_dir, "finalize") == {}
    unload(server, "probe")
    wait_for(lambda: len(records(model_dir, "finalize")) == 2, 20, "finalize of both instances")
    inits, finals = records(model_dir, "init"), records(model_dir, "finalize")
    assert sorted(finals) == sorted(inits)
    for name, record in finals.items():
        assert record["pid"] == inits[name]["pid"], "finalize runs in the instance's own process"


def test_reload_replaces_the_instances(server, probe):
    """Loading a loaded model again (explicit mode) starts new instances and finalizes the
    old ones."""
    load(server, "probe")
    (first,) = records(probe, "init").values()
    load(server, "probe", dict(BASE_CONFIG, parameters={"RELOAD": {"string_value": "1"}}))
    wait_for(lambda: records(probe, "finalize"), 20, "finalize of the replaced instance")
    (final,) = records(probe, "finalize").values()
    assert final["pid"] == first["pid"]
    result = infer(server, "http", "probe", {"IN": np.array([1], np.int32)})
    who = json.loads(text_output(result, "WHO"))
    assert who["pid"] != first["pid"]
    (second,) = [r for r in records(probe, "init").values() if r["pid"] == who["pid"]]
    assert json.loads(second["args"]["model_config"])["parameters"] == {
        "RELOAD": {"string_value": "1"}
    }
