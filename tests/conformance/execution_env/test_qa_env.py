"""The Python environment a model runs in, as NVIDIA's qa sees it (docs/qa_coverage.md): the
locale (qa env, the cases that run without conda; EXECUTION_ENV_PATH itself is
tests/backend/test_execution_env.py) and the original's C++ module by its name (qa restart's
model imports c_python_backend_utils)."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conformance_support.clients import infer, text_output
from conformance_support.stub_env import stub_python

UNSET = {"LC_ALL": "", "LANG": "", "LC_CTYPE": ""}
C_UTF8 = {"LC_ALL": "C.UTF-8"}


def model_locale(server) -> list:
    """What locale.getlocale() says in the model's execute."""
    return json.loads(text_output(infer(server, "http", "qa_locale", {}), "LOCALE"))


@pytest.fixture(scope="module")
def unset_server(feature_repository):
    """A server started with no locale, serving both models."""
    models = ["qa_locale", "qa_c_utils"]
    start = feature_repository.start(model_control_mode="explicit", load_models=models, env=UNSET)
    with start as server:
        yield server


def c_utf8_locale(feature_repository) -> tuple[list, str]:
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["qa_locale"], env=C_UTF8
    )
    with start as server:
        return model_locale(server), server.log_text()


def interpreter_locale(env: dict[str, str]) -> list:
    """locale.getlocale() of the stubs' Python once the locale is taken from ``env`` (how
    C.UTF-8 is named varies between Python versions)."""
    probe = "import json, locale; locale.setlocale(locale.LC_CTYPE, ''); "
    probe += "print(json.dumps(locale.getlocale()))"
    done = subprocess.run(
        [stub_python(), "-c", probe], env={**os.environ, **env}, capture_output=True, timeout=60
    )
    return json.loads(done.stdout)


def test_without_a_locale_the_model_has_none(unset_server):
    """qa env: "Locale is (None, None)" with no locale set: the model's Python does not coerce
    the C locale to C.UTF-8."""
    assert model_locale(unset_server) == [None, None]
    assert "Locale is (None, None)" in unset_server.log_text()


@pytest.mark.deviation(
    "the wheel's original leaves its model at the C locale whatever the server's locale is; "
    "NVIDIA's qa env test expects the server's (LC_ALL=C.UTF-8: ('en_US', 'UTF-8'))"
)
def test_the_model_follows_the_servers_locale(feature_repository):
    seen, log = c_utf8_locale(feature_repository)
    expected = interpreter_locale(C_UTF8)
    assert expected[1] == "UTF-8"
    assert seen == expected
    assert f"Locale is {tuple(expected)}" in log


@pytest.mark.deviation("pins the original's C locale under LC_ALL=C.UTF-8", backend="original")
def test_original_keeps_the_c_locale(feature_repository):
    seen, _ = c_utf8_locale(feature_repository)
    assert seen == [None, None]


def test_the_original_c_module_is_importable(unset_server):
    """qa restart's model imports c_python_backend_utils and reads
    shared_memory.free_memory(); the classes are pb_utils' own."""
    seen = json.loads(text_output(infer(unset_server, "http", "qa_c_utils", {}), "RESULT"))
    assert seen == {"free_memory": ["int", True], "same_classes": [True, True, True, True]}
