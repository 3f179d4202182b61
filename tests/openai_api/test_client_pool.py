"""The endpoint's kept gRPC clients (pybackend/openai_api/client_pool.py), with stand-in
clients: which are kept after a request, which are closed, and what else goes with them."""

from __future__ import annotations

import contextlib
from typing import Any, List

import pytest

from pybackend.openai_api.client_pool import ClientPool
from pybackend.openai_api.requests import ApiError


class FakeClient:
    def __init__(self, number: int) -> None:
        self.number = number
        self.closed = False

    def close(self) -> None:
        assert not self.closed, "closed twice"
        self.closed = True


@pytest.fixture()
def made() -> List[FakeClient]:
    return []


@pytest.fixture()
def pool(made: List[FakeClient]) -> ClientPool:
    def make() -> Any:
        made.append(FakeClient(len(made)))
        return made[-1]

    return ClientPool(make, keep=2)


def test_a_request_that_ends_normally_leaves_its_client_for_the_next(pool, made) -> None:
    for _ in range(3):
        with pool.lease() as client:
            assert client is made[0]
    assert len(made) == 1 and not made[0].closed and pool.idle() == 1


def test_concurrent_leases_get_clients_of_their_own_and_at_most_keep_stay(pool, made) -> None:
    with pool.lease() as a, pool.lease() as b, pool.lease() as c:
        assert len({id(a), id(b), id(c)}) == 3
    assert pool.idle() == 2
    assert [m.closed for m in made] == [True, False, False]  # c ended first, then b, then a


@pytest.mark.parametrize(
    "error",
    [
        ApiError(404, "no model"),
        ApiError(500, "the model failed"),
        ApiError(504, "no response within 30 s"),
        BrokenPipeError("client gone"),
    ],
)
def test_an_answer_or_the_http_client_gone_keeps_the_client(pool, made, error: Exception) -> None:
    with pytest.raises(type(error)):
        with pool.lease():
            raise error
    with pool.lease() as client:
        assert client is made[0]
    assert not made[0].closed


@pytest.mark.parametrize("error", [RuntimeError("fault"), KeyError("piece")])
def test_a_fault_of_the_endpoint_closes_the_client_and_every_kept_one(
    pool, made, error: Exception
) -> None:
    with pool.lease(), pool.lease():
        pass
    assert pool.idle() == 2
    with pytest.raises(type(error)):
        with pool.lease():
            raise error
    assert pool.idle() == 0 and all(m.closed for m in made)
    with pool.lease() as client:
        assert client is made[2] and not client.closed


@pytest.mark.parametrize("error", [None, ApiError(503, "Triton is not reachable")])
def test_a_spoiled_client_is_closed_with_every_kept_one(pool, made, error) -> None:
    with pool.lease(), pool.lease():
        pass
    with pytest.raises(ApiError) if error else contextlib.nullcontext():
        with pool.lease() as client:
            pool.spoil(client)
            if error:
                raise error
    assert all(m.closed for m in made) and pool.idle() == 0  # the kept one went too
    with pool.lease() as client:
        assert client is made[2]
    assert pool.idle() == 1  # a later client of the same pool is kept again


def test_close_closes_the_kept_clients_and_those_still_leased_at_their_end(pool, made) -> None:
    with pool.lease():
        pass
    with pool.lease() as leased:
        pool.close()
        assert not leased.closed
    assert leased.closed and pool.idle() == 0


def test_a_close_that_fails_does_not_hide_the_error_that_ended_the_lease(pool, made) -> None:
    with pool.lease() as client:
        pass

    def refuse() -> None:
        raise OSError("close failed")

    client.close = refuse  # type: ignore[method-assign]
    with pytest.raises(RuntimeError, match="fault"):
        with pool.lease():
            raise RuntimeError("fault")
    assert pool.idle() == 0
