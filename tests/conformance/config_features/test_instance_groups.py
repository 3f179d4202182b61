"""instance_group options with python models, in every PYBACKEND_INSTANCE_PROCESS mode
(``own`` is what the original does in all of them): without the rate limiter
(``--rate-limit=off``) every instance executes at once whatever ``rate_limiter`` resources
they list; ``passive`` instances are initialized and never get a request; several groups
(one named) give every instance its name and its share; a group's ``host_policy`` puts its
instances, and only them, on the policy's CPUs (``cpu-cores``) or NUMA node (``numa-node``),
from ``initialize`` on. **Fixed**: ours ran the first instance in the stub started early at
model load (under no policy), and under shared/fork every instance where that process ran.

Counted by the models (instance_support), never timed. One server."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib

import numpy as np
import pytest
from instance_support import MODES, read_counter, write_model

from conformance_support.clients import infer
from conformance_support.launcher import start_server

CPU = "kind: KIND_CPU"
# The CPU a host_policy pins to: one this process may use (so tritonserver may too).
PIN = min(os.sched_getaffinity(0))
EVERY_CPU = sorted(os.sched_getaffinity(0))
HAS_NUMA = pathlib.Path("/proc/thread-self/numa_maps").exists()


@pytest.fixture(scope="module")
def counters(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("instance_group_counters")


@pytest.fixture(scope="module")
def server(tmp_path_factory, counters):
    repository = tmp_path_factory.mktemp("instance_groups")
    limited = 'rate_limiter { resources [ { name: "R" count: 1 } ] }'
    groups = {
        "unlimited": f"{{ count: 4 {CPU} {limited} }}",
        "passive": f"{{ count: 2 {CPU} passive: true }}, {{ count: 1 {CPU} }}",
        "groups": f'{{ count: 1 {CPU} }}, {{ name: "big_MODE" count: 2 {CPU} }}',
        "placed": (
            f'{{ count: 2 {CPU} host_policy: "pinned" }}, '
            f'{{ count: 1 {CPU} host_policy: "node0" }}, {{ count: 1 {CPU} }}'
        ),
    }
    for mode in MODES:
        for model, group in groups.items():
            name = f"{model}_{mode}"
            write_model(repository, name, group.replace("MODE", mode), counters / name, mode)
    flags = [
        "--rate-limit=off",
        f"--host-policy=pinned,cpu-cores={PIN}-{PIN}",
        "--host-policy=node0,numa-node=0",
    ]
    with start_server(repository, extra_args=flags) as srv:
        yield srv


def clients(server, model: str, count: int, limit: int) -> None:
    def one(_: int) -> None:
        infer(server, "http", model, {"IN": np.array([limit], np.int32)})

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        list(pool.map(one, range(count)))


@pytest.mark.parametrize("mode", MODES)
def test_without_the_rate_limiter_every_instance_runs_at_once(server, counters, mode):
    clients(server, f"unlimited_{mode}", 8, 4)
    assert read_counter(counters / f"unlimited_{mode}")["peak"] == 4


@pytest.mark.parametrize("mode", MODES)
def test_passive_instances_initialize_and_never_execute(server, counters, mode):
    clients(server, f"passive_{mode}", 4, 1)
    state = read_counter(counters / f"passive_{mode}")
    model = f"passive_{mode}"
    assert sorted(name for name, *_ in state["inits"]) == [
        f"{model}_0_0",
        f"{model}_0_1",
        f"{model}_1_0",
    ]
    assert [name for name, *_ in state["executes"]] == [f"{model}_1_0"] * 4


@pytest.mark.parametrize("mode", MODES)
def test_every_group_serves_under_its_name(server, counters, mode):
    # Rounds of 3 executes at once on 3 instances: each instance takes one of each round.
    clients(server, f"groups_{mode}", 6, 3)
    state = read_counter(counters / f"groups_{mode}")
    names = sorted([f"groups_{mode}_0_0", f"big_{mode}_0", f"big_{mode}_1"])
    assert sorted(name for name, *_ in state["inits"]) == names
    assert sorted(name for name, *_ in state["executes"]) == sorted(names * 2)
    assert state["peak"] == 3


@pytest.mark.parametrize("mode", MODES)
def test_host_policy_places_its_instances(server, counters, mode):
    clients(server, f"placed_{mode}", 4, 4)
    state = read_counter(counters / f"placed_{mode}")
    model = f"placed_{mode}"
    pinned, node, plain = [f"{model}_0_0", f"{model}_0_1"], f"{model}_1_0", f"{model}_2_0"
    for phase in ("inits", "executes"):
        cpus = {name: where for name, where, _ in state[phase]}
        assert cpus == {pinned[0]: [PIN], pinned[1]: [PIN], node: EVERY_CPU, plain: EVERY_CPU}
        if HAS_NUMA:
            policy = {name: numa for name, _, numa in state[phase]}
            assert policy[node] == "bind:0"
            assert {policy[n] for n in [*pinned, plain]} == {"default"}
