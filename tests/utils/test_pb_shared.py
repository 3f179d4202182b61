"""pb_utils.shared(key, factory) (docs/instances.md): one object per key for the process,
built once by the first caller; concurrent callers of a key wait for that build; a failed
build reaches every caller and is not remembered."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

import triton_python_backend_utils as pb_utils
from pybackend.utils import process_shared as shared_module

BOUND_S = 30.0


@pytest.fixture(autouse=True)
def empty_table() -> Iterator[None]:
    shared_module._forget_all()
    yield
    shared_module._forget_all()


def test_one_object_per_key_built_once() -> None:
    calls = []

    def build() -> object:
        calls.append(1)
        return object()

    a = pb_utils.shared("weights", build)
    assert pb_utils.shared("weights", build) is a
    assert pb_utils.shared("other", build) is not a
    assert len(calls) == 2


def test_concurrent_callers_wait_for_the_first_build() -> None:
    started, release = threading.Event(), threading.Event()
    builds = []

    def slow() -> object:
        builds.append(threading.get_ident())
        started.set()
        assert release.wait(BOUND_S)
        return object()

    results: list[object] = []
    first = threading.Thread(target=lambda: results.append(pb_utils.shared("k", slow)))
    first.start()
    assert started.wait(BOUND_S)
    # These arrive while the build runs: they must wait for it, not build again.
    others = [
        threading.Thread(target=lambda: results.append(pb_utils.shared("k", slow)))
        for _ in range(4)
    ]
    for t in others:
        t.start()
    release.set()
    for t in [first, *others]:
        t.join(BOUND_S)
    assert len(builds) == 1
    assert len(results) == 5 and len({id(r) for r in results}) == 1


def test_a_failed_build_reaches_the_waiters_and_is_not_remembered() -> None:
    started, release = threading.Event(), threading.Event()

    def broken() -> object:
        started.set()
        assert release.wait(BOUND_S)
        raise ValueError("no weights")

    errors: list[BaseException] = []

    def call() -> None:
        try:
            pb_utils.shared("k", broken)
        except ValueError as e:
            errors.append(e)

    first = threading.Thread(target=call)
    first.start()
    assert started.wait(BOUND_S)
    waiter = threading.Thread(target=call)
    waiter.start()
    release.set()
    first.join(BOUND_S)
    waiter.join(BOUND_S)
    assert [str(e) for e in errors] == ["no weights", "no weights"]
    fixed = object()
    assert pb_utils.shared("k", lambda: fixed) is fixed  # the next call tries again


def test_a_factory_asking_for_its_own_key_is_refused_not_a_hang() -> None:
    def build() -> object:
        return pb_utils.shared("weights", build)

    with pytest.raises(RuntimeError, match="asked for 'weights' itself"):
        pb_utils.shared("weights", build)
    # Nothing is remembered: a good factory builds it next time.
    assert pb_utils.shared("weights", lambda: 7) == 7


def test_factories_that_wait_for_each_other_in_two_threads_are_refused_not_a_hang() -> None:
    # Two instances' initialize at once: A's factory asks for B while B's asks for A.
    both_building = threading.Barrier(2, timeout=BOUND_S)
    errors: list[BaseException] = []

    def build(mine: str, other: str) -> object:
        both_building.wait()
        try:
            return pb_utils.shared(other, lambda: build(other, mine))
        except RuntimeError as e:
            errors.append(e)
            raise

    def first_call(key: str, other: str) -> None:
        try:
            pb_utils.shared(key, lambda: build(key, other))
        except RuntimeError:
            pass

    threads = [
        threading.Thread(target=first_call, args=("a", "b"), daemon=True),
        threading.Thread(target=first_call, args=("b", "a"), daemon=True),
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(BOUND_S)
    assert not any(t.is_alive() for t in threads), "the two factories hang on each other"
    assert len(errors) >= 1, errors
    assert "wait for each other" in str(errors[0]) and "without asking for the other" in str(
        errors[0]
    )
    assert pb_utils.shared("a", lambda: 1) == 1  # nothing half-built is remembered
