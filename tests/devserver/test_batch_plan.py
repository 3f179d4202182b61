"""The dev server's batch rules (pybackend/devserver/batcher.py ``plan``) at their edges; the
rules themselves are held to tritonserver by test_batching_differential.py."""

from __future__ import annotations

from pybackend.devserver.batcher import plan


def test_a_request_larger_than_the_batch_goes_alone_at_once() -> None:
    # tritonserver refuses it; the batcher must not wait for it or glue others to it.
    assert plan([9, 1], 8, (), delayed=True, waited=False) == 1


def test_waiting_is_for_a_delay_only() -> None:
    assert plan([1, 1], 8, (), delayed=True, waited=False) is None
    assert plan([1, 1], 8, (), delayed=False, waited=False) == 2
    assert plan([1, 1], 8, (), delayed=True, waited=True) == 2


def test_the_largest_preferred_size_reached_at_a_request_boundary_goes() -> None:
    # Running totals 2, 3, 5: both preferred sizes are boundaries, the larger one goes.
    assert plan([2, 1, 2], 8, (2, 5), delayed=True, waited=False) == 3
    # 2, 3, 4: only the first request makes a preferred size.
    assert plan([2, 1, 1], 8, (2, 5), delayed=True, waited=False) == 1
    # 1, 3, 4: the totals step over 2 and never reach 5: wait.
    assert plan([1, 2, 1], 8, (2, 5), delayed=True, waited=False) is None


def test_a_full_batch_goes_without_its_delay() -> None:
    assert plan([4, 4, 1], 8, (), delayed=True, waited=False) == 2
    assert plan([3, 3, 3], 8, (), delayed=True, waited=False) == 2
