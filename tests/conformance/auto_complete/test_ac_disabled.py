"""With --disable-auto-complete-config, auto_complete_config is never called (spec 2.1)."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer
from conformance_support.control import is_ready, model_config

MODELS = ["ac_full", "ac_marker", "ac_raises", "ac_returns_none"]


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit",
        load_models=MODELS,
        extra_args=["--disable-auto-complete-config"],
    )
    with start as srv:
        yield srv


def test_auto_complete_config_is_not_called(server, feature_repository):
    assert not (feature_repository.model_dir("ac_marker") / "auto_complete_called.json").exists()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_config_is_the_file_as_written(server, protocol):
    config = model_config(server, protocol, "ac_marker")
    assert [t["name"] for t in config["input"]] == ["IN"]
    bare = model_config(server, protocol, "ac_full")
    assert bare.get("input", []) == []
    assert bare.get("output", []) == []
    assert bare.get("max_batch_size", 0) == 0
    assert "dynamic_batching" not in bare


@pytest.mark.parametrize("model", ["ac_raises", "ac_returns_none"])
def test_broken_auto_complete_does_not_matter(server, model):
    assert is_ready(server, model)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_model_serves(server, protocol):
    data = np.array([3, 4], np.int32)
    assert infer(server, protocol, "ac_marker", {"IN": data}).outputs["OUT"].tolist() == [3, 4]
