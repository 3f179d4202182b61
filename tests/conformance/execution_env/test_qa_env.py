"""NVIDIA's qa L0_backend_python/env cases that run without conda: the locale a model's
Python sees follows the server's environment (docs/qa_coverage.md; the execution
environments themselves are tests/backend/test_execution_env.py)."""

from __future__ import annotations

import json

import pytest

from conformance_support.clients import infer, text_output

CASES = {
    # What the server is started with -> what locale.getlocale() says in the model.
    "unset": ({"LC_ALL": "", "LANG": "", "LC_CTYPE": ""}, [None, None]),
    "C.UTF-8": ({"LC_ALL": "C.UTF-8"}, ["en_US", "UTF-8"]),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_model_sees_the_servers_locale(feature_repository, case):
    env, expected = CASES[case]
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["qa_locale"], env=env
    )
    with start as server:
        seen = json.loads(text_output(infer(server, "http", "qa_locale", {}), "LOCALE"))
        log = server.log_text()
    assert seen == expected
    assert f"Locale is {tuple(expected)}" in log
