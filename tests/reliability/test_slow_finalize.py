"""A model whose finalize takes longer than stub-timeout-seconds (one that saves its state on
unload) runs it to its end, in every PYBACKEND_INSTANCE_PROCESS mode: the original waits for
finalize without a time bound, and so does ours unless finalize-timeout-seconds sets one.
Before, the wait for FINALIZE_REPLY was bounded by stub-timeout-seconds (30 s by default):
such a model was killed mid-finalize on ours, its state lost, where the original let it end.

With finalize-timeout-seconds set, a finalize past it is ended (the stub killed) and the
unload completes; the log names the setting."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from reliability_support import LogWatch, descendants, start, wait_for

STUB_TIMEOUT_S = 1
FINALIZE_S = 3.0  # > STUB_TIMEOUT_S
INSTANCES = {"slow_load": 1, "slow_load_fork": 2, "slow_load_shared": 2}


def _server(done: Path, config: list[tuple[str, str]]) -> Any:
    env = {"SLOW_FINALIZE_S": str(FINALIZE_S), "SLOW_FINALIZE_DONE": str(done)}
    return start(
        [], backend_config=[("stub-timeout-seconds", str(STUB_TIMEOUT_S)), *config], env=env
    )


@pytest.fixture(scope="module")
def done(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("finalized")


@pytest.fixture(scope="module")
def unbounded(done: Path) -> Iterator[Any]:
    with _server(done, []) as s:
        yield s


def _unload(server: Any, model: str) -> float:
    """Loads and unloads model; returns how long the unload took until the model's processes
    were gone."""
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(server.http_url, network_timeout=120) as client:
        before = set(descendants(server.pid))
        client.load_model(model)
        assert set(descendants(server.pid)) - before  # its stub, or its shared/fork processes
        t0 = time.monotonic()
        client.unload_model(model)
        wait_for(
            "the model's processes to end",
            lambda: not set(descendants(server.pid)) - before,
            timeout=60,
        )
        return time.monotonic() - t0


@pytest.mark.parametrize("model", sorted(INSTANCES))
def test_a_finalize_longer_than_stub_timeout_seconds_ends(
    unbounded: Any, done: Path, model: str
) -> None:
    watch = LogWatch(unbounded)
    took = _unload(unbounded, model)
    assert took > STUB_TIMEOUT_S  # the finalize did outlive the stub bound
    names = sorted(p.name for p in done.iterdir() if p.name.startswith(model + "_"))
    assert len(names) == INSTANCES[model], names  # every instance's finalize wrote its file
    for p in done.iterdir():
        p.unlink()
    assert "killing the stub" not in watch.text()
    assert "FINALIZE_REPLY" not in watch.text()


def test_finalize_timeout_seconds_bounds_it(done: Path) -> None:
    with _server(done, [("finalize-timeout-seconds", "1")]) as server:
        watch = LogWatch(server)
        took = _unload(server, "slow_load")
        assert took < FINALIZE_S  # not waited for to its end
        assert not [p for p in done.iterdir() if p.name.startswith("slow_load_")]
        watch.wait(
            "no FINALIZE_REPLY within 1 s (backend config finalize-timeout-seconds); "
            "killing the stub"
        )
        assert "slow_load" in {m["name"] for m in _index(server)}  # the server still answers


def _index(server: Any) -> list[dict[str, Any]]:
    import tritonclient.http as httpclient

    with httpclient.InferenceServerClient(server.http_url) as client:
        return client.get_model_repository_index()
