"""A model whose stub fails, dies or hangs while it loads: the load fails within seconds
(UV-08: 5 s; a hang after initialize-timeout-seconds, which has no default bound: a load
may take minutes, as on the original; tests/reliability/test_slow_load.py) and leaves
nothing behind: no stub, no shared-memory segment, no descriptor. The load API's answer and
the log carry the whole error with phase, model, version, instance, traceback and what to do
(UV-37)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import memfd_mappings, start, stubs
from tritonclient.utils import InferenceServerException

STUB_TIMEOUT_S = 3
LOAD_FAILS_WITHIN_S = 5.0


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    config = [
        ("stub-timeout-seconds", str(STUB_TIMEOUT_S)),
        ("initialize-timeout-seconds", str(STUB_TIMEOUT_S)),
    ]
    with start([], backend_config=config) as s:
        yield s


def _our_fds(pid: int) -> dict[str, int]:
    """Descriptors of the kinds the backend opens per stub, counted by kind."""
    counts: dict[str, int] = {}
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        for kind in ("memfd:", "pipe:", "anon_inode:[pidfd]", "anon_inode:[eventfd]"):
            if target.startswith(kind):
                counts[kind] = counts.get(kind, 0) + 1
    return counts


def _load_error(server: Any, model: str) -> tuple[str, float]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(server.http_url)
    try:
        t0 = time.monotonic()
        with pytest.raises(InferenceServerException) as info:
            client.load_model(model)
        return str(info.value), time.monotonic() - t0
    finally:
        client.close()


CASES = {
    "init_exits": "exited with code 4",
    "init_killed": "was killed by signal 9 (SIGKILL)",
    "init_hangs": f"no INIT_REPLY from the stub within {STUB_TIMEOUT_S} s "
    "(backend config initialize-timeout-seconds)",
}


@pytest.mark.parametrize("model", list(CASES))
def test_stub_lost_during_initialize_fails_the_load_and_releases_everything(
    server: Any, model: str
) -> None:
    fds_before = _our_fds(server.pid)
    for _attempt in range(2):  # a second attempt finds nothing left over from the first
        message, took = _load_error(server, model)
        bound = LOAD_FAILS_WITHIN_S + (STUB_TIMEOUT_S if model == "init_hangs" else 0)
        assert took < bound, f"the load took {took:.1f} s"
        assert (
            f"Failed to start the Python stub for model '{model}' version 1, "
            f"instance '{model}_0_0' (phase initialize)" in message
        )
        assert CASES[model] in message
        if model != "init_hangs":  # the original's text for a stub lost while it loads
            assert f"Stub process '{model}_0_0' is not healthy." in message
        assert f"{model}: initializing in pid" in message  # the stub's stderr tail
        assert not stubs(server, model)
        assert not [m for m in memfd_mappings(server.pid) if f"{model}_0_0" in m]
        assert _our_fds(server.pid) == fds_before


def test_initialize_exception_reaches_the_load_api_whole(server: Any) -> None:
    message, took = _load_error(server, "init_raises")
    assert took < LOAD_FAILS_WITHIN_S
    # The original's text (pybind11 rendering) ...
    assert (
        "ValueError: setting 'threshold' is missing: " + "x" * 20480 + " END-OF-MESSAGE" in message
    )
    assert "\n\nAt:\n" in message
    assert "init_raises/1/model.py(27): _check_setting" in message
    assert "init_raises/1/model.py(16): initialize" in message
    # ... and where it happened and what to do.
    assert (
        "This happened in phase initialize of model 'init_raises' version 1, "
        "instance 'init_raises_0_0'" in message
    )
    assert "Fix the error above, then load the model again." in message
    log = server.log_text()
    assert "failed to load 'init_raises' version 1" in log
    assert "x" * 20480 + " END-OF-MESSAGE" in log  # the log is not cut either
    assert not stubs(server, "init_raises")


def test_import_error_names_the_auto_complete_phase(server: Any) -> None:
    message, _ = _load_error(server, "import_fails")
    assert "NameError: name 'undefined_setting' is not defined" in message
    assert "import_fails/1/model.py(5): <module>" in message
    assert "This happened in phase auto_complete of model 'import_fails' version 1" in message
    assert not stubs(server, "import_fails")
