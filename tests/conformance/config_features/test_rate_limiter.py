"""tritonserver's rate limiter (``--rate-limit=execution_count``) over python models, in every
PYBACKEND_INSTANCE_PROCESS mode: the instances' ``rate_limiter`` resources bound how many
executes run at once across the instances (own and fork: separate processes, shared: threads
of one), a ``global`` resource across two models, and an instance is given back when
``execute`` returns, not when a decoupled model sends its final response.

Counted by the models (instance_support), never timed. Two servers: one with
``--rate-limit-resource`` counts, one with the defaults (a resource nobody counted on the
command line has the largest count an instance asks for; one that the command line leaves
out while naming others has none, and the load fails, so they cannot share a server)."""

from __future__ import annotations

import concurrent.futures
import pathlib

import numpy as np
import pytest
from instance_support import MODES, read_counter, write_model

from conformance_support.clients import infer
from conformance_support.launcher import start_server
from conformance_support.streaming import Stream

CPU = "kind: KIND_CPU"


def needs(resource: str, count: int, *, shared: bool = False) -> str:
    scope = " global: true" if shared else ""
    return f'rate_limiter {{ resources [ {{ name: "{resource}"{scope} count: {count} }} ] }}'


@pytest.fixture(scope="module")
def counters(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("rate_limit_counters")


@pytest.fixture(scope="module")
def counted(tmp_path_factory, counters):
    """``R_<mode>: 2`` for 4 instances that need 1 each; ``W_<mode>: 2`` for 2 that need 2."""
    repository = tmp_path_factory.mktemp("rate_limit_counted")
    flags = ["--rate-limit=execution_count"]
    for mode in MODES:
        group = f"{{ count: 4 {CPU} {needs(f'R_{mode}', 1)} }}"
        write_model(repository, f"pairs_{mode}", group, counters / f"pairs_{mode}", mode)
        group = f"{{ count: 2 {CPU} {needs(f'W_{mode}', 2)} }}"
        write_model(repository, f"whole_{mode}", group, counters / f"whole_{mode}", mode)
        flags += [f"--rate-limit-resource=R_{mode}:2", f"--rate-limit-resource=W_{mode}:2"]
    with start_server(repository, extra_args=flags) as server:
        yield server


@pytest.fixture(scope="module")
def defaults(tmp_path_factory, counters):
    """No resource counts on the command line."""
    repository = tmp_path_factory.mktemp("rate_limit_defaults")
    for mode in MODES:
        group = f"{{ count: 2 {CPU} {needs(f'D_{mode}', 2)} }}"
        write_model(repository, f"default_{mode}", group, counters / f"default_{mode}", mode)
        for model in ("a", "b"):
            group = f"{{ count: 1 {CPU} {needs(f'G_{mode}', 1, shared=True)} }}"
            write_model(repository, f"global_{model}_{mode}", group, counters / f"g_{mode}", mode)
        group = f"{{ count: 1 {CPU} {needs(f'E_{mode}', 1)} }}"
        write_model(
            repository, f"late_{mode}", group, counters / f"late_{mode}", mode, decoupled=True
        )
        write_model(
            repository,
            f"coro_{mode}",
            f"{{ count: 1 {CPU} {needs(f'C_{mode}', 1)} }}",
            counters / f"coro_{mode}",
            mode,
            decoupled=True,
            coroutine=True,
        )
    with start_server(repository, extra_args=["--rate-limit=execution_count"]) as server:
        yield server


def clients(server, models: list[str], count: int, limit: int) -> list[int]:
    """``count`` concurrent HTTP clients, one request each, spread over ``models``."""

    def one(k: int) -> int:
        result = infer(server, "http", models[k % len(models)], {"IN": np.array([limit], np.int32)})
        return int(result.outputs["OUT"][0])

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


@pytest.mark.parametrize("mode", MODES)
def test_resource_count_bounds_concurrent_executes(counted, counters, mode):
    # 4 instances, each needs 1 of R's 2: two executes at once, never three.
    assert sorted(clients(counted, [f"pairs_{mode}"], 8, 2)) == list(range(8))
    state = read_counter(counters / f"pairs_{mode}")
    assert state["peak"] == 2
    assert {name for name, *_ in state["inits"]} == {f"pairs_{mode}_0_{i}" for i in range(4)}


@pytest.mark.parametrize("mode", MODES)
def test_instance_needing_the_whole_resource_runs_alone(counted, counters, mode):
    clients(counted, [f"whole_{mode}"], 4, 1)
    assert read_counter(counters / f"whole_{mode}")["peak"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_default_count_is_the_largest_need(defaults, counters, mode):
    # D is not on the command line: its count is 2, what one instance needs.
    clients(defaults, [f"default_{mode}"], 4, 1)
    assert read_counter(counters / f"default_{mode}")["peak"] == 1


@pytest.mark.parametrize("mode", MODES)
def test_global_resource_is_shared_by_two_models(defaults, counters, mode):
    models = [f"global_a_{mode}", f"global_b_{mode}"]
    clients(defaults, models, 4, 1)
    state = read_counter(counters / f"g_{mode}")
    assert state["peak"] == 1
    assert {name for name, *_ in state["executes"]} == {f"{m}_0_0" for m in models}


@pytest.mark.parametrize("mode", MODES)
def test_decoupled_instance_is_released_when_execute_returns(defaults, counters, mode):
    # One instance, a resource of 1: every execute runs before any final response is sent,
    # each final waiting for all four to have entered.
    with Stream(defaults) as stream:
        for k in range(4):
            stream.send(f"late_{mode}", {"IN": np.array([4], np.int32)}, request_id=f"r{k}")
        events = stream.until_final(4)
    assert sorted(e.value() for e in events if e.outputs) == [0, 1, 2, 3]
    state = read_counter(counters / f"late_{mode}")
    assert state["peak"] == 1
    assert sorted(state["finals"]) == [[k, 4] for k in range(4)]


@pytest.mark.parametrize("mode", MODES)
def test_decoupled_coroutines_are_not_limited(defaults, counters, mode):
    # A decoupled `async def execute` hands the instance back at once: four coroutines of
    # the one instance run together although it needs the whole resource.
    with Stream(defaults) as stream:
        for k in range(4):
            stream.send(f"coro_{mode}", {"IN": np.array([4], np.int32)}, request_id=f"r{k}")
        events = stream.until_final(4)
    assert sorted(e.value() for e in events if e.outputs) == [0, 1, 2, 3]
    assert read_counter(counters / f"coro_{mode}")["peak"] == 4
