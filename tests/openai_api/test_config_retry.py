"""When the OpenAI endpoint runs a request once more (Upstream.with_config): only where it
failed on a kept configuration that has changed since, at most once, and never a request
that timed out or was turned away for load. The reads are stand-ins; through a real
tritonserver with a reload: tests/integration/test_openai_reload.py."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

pytest.importorskip("tritonclient.grpc")

from pybackend.openai_api.requests import ApiError  # noqa: E402
from pybackend.openai_api.upstream import Upstream  # noqa: E402

V1: Dict[str, Any] = {"name": "m", "version": 1}
V2: Dict[str, Any] = {"name": "m", "version": 2}


class Model:
    """The server's configurations in turn (the last one stays) and the attempts made."""

    def __init__(self, *configs: Dict[str, Any]) -> None:
        self.configs = list(configs)
        self.reads = 0
        self.attempts: List[Dict[str, Any]] = []

    def read(self, client: Any, model: str) -> Dict[str, Any]:
        self.reads += 1
        return self.configs[min(self.reads, len(self.configs)) - 1]

    def failing(self, *statuses: int) -> Any:
        """An attempt that fails with these statuses in turn, then succeeds."""

        left = list(statuses)

        def attempt(config: Dict[str, Any]) -> str:
            self.attempts.append(config)
            if left:
                raise ApiError(left.pop(0), "refused")
            return f"answered with version {config['version']}"

        return attempt


def upstream(model: Model, ttl: float = 60.0) -> Upstream:
    up = Upstream("127.0.0.1:1", timeout=5, config_ttl=ttl)  # never reached: reads stand in
    up._read_config = model.read  # type: ignore[method-assign]
    return up


def kept(model: Model, up: Upstream) -> None:
    """A first request reads the configuration and keeps it."""
    assert up.with_config("m", model.failing(), client=object()) == "answered with version 1"
    model.attempts.clear()


def test_a_failure_on_a_configuration_read_for_it_is_the_answer() -> None:
    model = Model(V1, V2)
    with pytest.raises(ApiError):
        upstream(model).with_config("m", model.failing(400), client=object())
    assert (model.reads, len(model.attempts)) == (1, 1)


def test_a_failure_on_a_kept_configuration_that_has_not_changed_is_the_answer() -> None:
    model = Model(V1)
    up = upstream(model)
    kept(model, up)
    with pytest.raises(ApiError):
        up.with_config("m", model.failing(400), client=object())
    assert (model.reads, len(model.attempts)) == (2, 1)  # one read to compare, no retry


@pytest.mark.parametrize("status", [400, 404, 500, 501, 503])
def test_a_failure_on_a_kept_configuration_since_changed_runs_once_more(status: int) -> None:
    model = Model(V1, V2)
    up = upstream(model)
    kept(model, up)
    assert up.with_config("m", model.failing(status), client=object()) == (
        "answered with version 2"
    )
    assert model.attempts == [V1, V2]


def test_the_second_attempt_is_the_last() -> None:
    model = Model(V1, V2, {"name": "m", "version": 3})
    up = upstream(model)
    kept(model, up)
    with pytest.raises(ApiError):
        up.with_config("m", model.failing(400, 400), client=object())
    assert model.attempts == [V1, V2]


@pytest.mark.parametrize("status", [504, 429])
def test_a_timeout_or_a_refusal_for_load_is_never_run_again(status: int) -> None:
    model = Model(V1, V2)
    up = upstream(model)
    kept(model, up)
    with pytest.raises(ApiError) as caught:
        up.with_config("m", model.failing(status), client=object())
    assert caught.value.status == status
    assert (model.reads, model.attempts) == (1, [V1])  # not even read again


def test_with_a_ttl_of_zero_nothing_is_kept_and_nothing_run_again() -> None:
    model = Model(V1, V2)
    up = upstream(model, ttl=0)
    assert up.with_config("m", model.failing(), client=object()) == "answered with version 1"
    with pytest.raises(ApiError):
        up.with_config("m", model.failing(400), client=object())
    assert model.reads == 2
