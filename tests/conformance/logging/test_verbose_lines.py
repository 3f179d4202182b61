"""The backend's own lines at --log-verbose=1 (issue #19), which operators grep for: the
original's texts, verbatim, from load to unload. Both backends."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from conformance_support.clients import infer
from conformance_support.control import load, unload, wait_for

MODEL = "log_finalize"  # an identity; one instance, its group named after the model
INSTANCE = f"{MODEL}_0"

LINES = [
    "TRITONBACKEND_GetBackendAttribute: setting attributes",
    f"TRITONBACKEND_ModelInitialize: {MODEL} (version 1)",
    f"TRITONBACKEND_ModelInstanceInitialize: {INSTANCE} (CPU device 0)",
    f"TRITONBACKEND_ModelInstanceInitialize: instance initialization successful {INSTANCE} "
    "(device 0)",
    f"model {MODEL}, instance {INSTANCE}, executing 1 requests",
    f"TRITONBACKEND_ModelInstanceExecute: model instance name {INSTANCE} released 1 requests",
    "TRITONBACKEND_ModelInstanceFinalize: delete instance state",
    "TRITONBACKEND_ModelFinalize: delete model state",
]


@pytest.fixture(scope="module")
def log(feature_repository) -> str:
    start = feature_repository.start(model_control_mode="explicit", extra_args=["--log-verbose=1"])
    with start as server:
        load(server, MODEL)
        infer(server, "http", MODEL, {"IN": np.array([7], np.int32)})
        unload(server, MODEL)
        wait_for(
            lambda: LINES[-1] in server.log_text(), 10.0, "the model's finalize line in the log"
        )
        return server.log_text()


def messages(log: str) -> list[str]:
    """Each log line's message, unquoted (Triton writes it as a JSON string)."""
    found = []
    for line in log.splitlines():
        m = re.match(r'^[IWEV]\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] (".*")$', line)
        if m:
            found.append(json.loads(m.group(1)))
    return found


@pytest.mark.parametrize("line", LINES)
def test_line(log, line):
    assert line in messages(log)


def test_api_version_line(log):
    assert any(m.startswith("'python' TRITONBACKEND API version: 1.") for m in messages(log))


def test_model_configuration_dump(log):
    """`model configuration:` and the configuration as rapidjson's PrettyWriter lays it
    out (which is Python's json.dumps(indent=4) for this document)."""
    (dump,) = [m for m in messages(log) if m.startswith("model configuration:\n")]
    body = dump[len("model configuration:\n") :]
    config = json.loads(body)
    assert config["name"] == MODEL
    assert config["backend"] == "python"
    assert body == json.dumps(config, indent=4)
