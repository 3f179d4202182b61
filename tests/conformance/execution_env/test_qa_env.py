"""NVIDIA's qa L0_backend_python/env cases that run without conda: the locale a model's
Python sees (docs/qa_coverage.md; the execution environments themselves are
tests/backend/test_execution_env.py)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conformance_support.clients import infer, text_output
from conformance_support.stub_env import stub_python

UNSET = {"LC_ALL": "", "LANG": "", "LC_CTYPE": ""}


def model_locale(feature_repository, env: dict[str, str]) -> tuple[list, str]:
    """What locale.getlocale() says in the model (execute) and the server log, for a server
    started with ``env``."""
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["qa_locale"], env=env
    )
    with start as server:
        seen = json.loads(text_output(infer(server, "http", "qa_locale", {}), "LOCALE"))
        return seen, server.log_text()


def interpreter_locale(env: dict[str, str]) -> list:
    """locale.getlocale() of the stubs' Python once the locale is taken from ``env`` (how
    C.UTF-8 is named varies between Python versions)."""
    probe = "import json, locale; locale.setlocale(locale.LC_CTYPE, ''); "
    probe += "print(json.dumps(locale.getlocale()))"
    done = subprocess.run(
        [stub_python(), "-c", probe], env={**os.environ, **env}, capture_output=True, timeout=60
    )
    return json.loads(done.stdout)


def test_without_a_locale_the_model_has_none(feature_repository):
    """qa env: "Locale is (None, None)" with no locale set: the model's Python does not coerce
    the C locale to C.UTF-8."""
    seen, log = model_locale(feature_repository, UNSET)
    assert seen == [None, None]
    assert "Locale is (None, None)" in log


@pytest.mark.deviation(
    "the wheel's original leaves its model at the C locale whatever the server's locale is; "
    "NVIDIA's qa env test expects the server's (LC_ALL=C.UTF-8: ('en_US', 'UTF-8'))"
)
def test_the_model_follows_the_servers_locale(feature_repository):
    env = {"LC_ALL": "C.UTF-8"}
    seen, log = model_locale(feature_repository, env)
    expected = interpreter_locale(env)
    assert expected[1] == "UTF-8"
    assert seen == expected
    assert f"Locale is {tuple(expected)}" in log


@pytest.mark.deviation("pins the original's C locale under LC_ALL=C.UTF-8", backend="original")
def test_original_keeps_the_c_locale(feature_repository):
    seen, _ = model_locale(feature_repository, {"LC_ALL": "C.UTF-8"})
    assert seen == [None, None]


def test_the_original_c_module_is_importable(feature_repository):
    """qa restart's model imports c_python_backend_utils and reads
    shared_memory.free_memory(); the classes are pb_utils' own."""
    with feature_repository.start_models(["qa_c_utils"]) as server:
        seen = json.loads(text_output(infer(server, "http", "qa_c_utils", {}), "RESULT"))
    assert seen == {"free_memory": ["int", True], "same_classes": [True, True, True, True]}
