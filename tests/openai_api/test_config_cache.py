"""The endpoint's kept model configurations (pybackend/openai_api/config_cache.py), on a
clock the test moves: a configuration is read once per ``ttl``; a failed read keeps nothing;
``changed`` reads afresh and keeps the new one; ``ttl`` 0 reads every time. Through a real
tritonserver with a reload: tests/integration/test_openai_reload.py."""

from __future__ import annotations

from typing import Any, Dict, List

import pytest

from pybackend.openai_api.config_cache import ConfigCache, Read


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Server:
    """Answers configuration reads in turn (an exception is raised), the last one again
    when the others are used up; counts them."""

    def __init__(self, *answers: Any) -> None:
        self.answers: List[Any] = list(answers)
        self.reads = 0

    def read(self) -> Dict[str, Any]:
        self.reads += 1
        answer = self.answers[min(self.reads, len(self.answers)) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer


def test_a_configuration_is_read_once_while_it_is_younger_than_the_ttl() -> None:
    clock, server = Clock(), Server({"name": "m", "v": 1}, {"name": "m", "v": 2})
    cache = ConfigCache(ttl=5.0, clock=clock)
    assert cache.get("m", server.read) == Read({"name": "m", "v": 1}, kept=False)
    clock.now += 4.9
    assert cache.get("m", server.read) == Read({"name": "m", "v": 1}, kept=True)
    assert server.reads == 1
    clock.now += 0.1  # five seconds after the read: read again
    assert cache.get("m", server.read) == Read({"name": "m", "v": 2}, kept=False)
    assert server.reads == 2


def test_models_are_kept_apart() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=5.0, clock=clock)
    a, b = Server({"name": "a"}), Server({"name": "b"})
    cache.get("a", a.read)
    assert cache.get("b", b.read) == Read({"name": "b"}, kept=False)
    assert cache.get("a", a.read) == Read({"name": "a"}, kept=True)
    assert (a.reads, b.reads) == (1, 1)


def test_a_failed_read_keeps_nothing() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=5.0, clock=clock)
    server = Server(LookupError("no model m"), {"name": "m"})
    with pytest.raises(LookupError, match="no model m"):
        cache.get("m", server.read)
    assert cache.get("m", server.read) == Read({"name": "m"}, kept=False)  # asked again


def test_changed_reads_afresh_and_keeps_what_it_read() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=5.0, clock=clock)
    server = Server({"v": 1}, {"v": 1}, {"v": 2})
    used = cache.get("m", server.read).config
    assert cache.changed("m", used, server.read) is False  # the same again: the request's fault
    assert cache.changed("m", used, server.read) is True  # reloaded with another config
    assert server.reads == 3
    assert cache.get("m", server.read) == Read({"v": 2}, kept=True)
    assert server.reads == 3


def test_changed_passes_on_what_the_read_raises_and_forgets_the_model() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=5.0, clock=clock)
    server = Server({"v": 1}, LookupError("unloaded"), {"v": 3})
    used = cache.get("m", server.read).config
    with pytest.raises(LookupError, match="unloaded"):
        cache.changed("m", used, server.read)
    assert cache.get("m", server.read) == Read({"v": 3}, kept=False)


def test_a_ttl_of_zero_reads_every_time() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=0.0, clock=clock)
    server = Server({"v": 1})
    for _ in range(3):
        assert cache.get("m", server.read) == Read({"v": 1}, kept=False)
    assert server.reads == 3


def test_a_slow_read_does_not_put_back_what_a_later_read_replaced() -> None:
    clock = Clock()
    cache = ConfigCache(ttl=5.0, clock=clock)

    def slow() -> Dict[str, Any]:
        """Read before a reload, returns after a request found the change and kept it."""
        clock.now += 1
        assert cache.changed("m", {"v": 1}, lambda: {"v": 2}) is True
        return {"v": 1}

    assert cache.get("m", slow) == Read({"v": 1}, kept=False)  # its caller gets what it read
    assert cache.get("m", Server({"v": 3}).read) == Read({"v": 2}, kept=True)
