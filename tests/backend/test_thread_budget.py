"""Per-instance thread budget (UV-13, csrc/backend/thread_budget.h) through the real server:
the env_probe model reports the OMP_NUM_THREADS family of variables its stub sees.

The backend caps the cores by the CPU limit of its cgroup (csrc/backend/cores.h), read under
PYBACKEND_CGROUP_ROOT when set: every server here gets a fake cgroup tree, with no limit unless
the test sets one, so the expected shares do not depend on the machine's own cgroup."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integration_support.clients import probe_answer
from integration_support.fake_cgroup import fake_cgroup_root
from pybackend.server import TritonServer

MODELS = Path(__file__).resolve().parent / "models"
VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "BLIS_NUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
CORES = len(os.sched_getaffinity(0))  # the server inherits the test's affinity


def config(count: int, budget: str | None = None) -> str:
    doc = {
        "backend": "python",
        "max_batch_size": 0,
        "input": [{"name": "IN", "data_type": "TYPE_INT32", "dims": [1]}],
        "output": [{"name": "ENV", "data_type": "TYPE_STRING", "dims": [1]}],
        "instance_group": [{"count": count, "kind": "KIND_CPU"}],
    }
    if budget is not None:
        doc["parameters"] = {"THREAD_BUDGET": {"string_value": budget}}
    return json.dumps(doc)


def start(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    cpu_max: dict[str, str] | None = None,
    **kwargs,
) -> TritonServer:
    for name in VARIABLES:  # whatever the test runner has set must not leak into the server
        monkeypatch.delenv(name, raising=False)
    # In the cgroup v2 /kubepods/pod1/ctr, unlimited unless `cpu_max` (cgroup -> its cpu.max
    # text, relative to /sys/fs/cgroup) sets a limit on it or an ancestor.
    limits = {"kubepods/pod1/ctr": "max 100000", **(cpu_max or {})}
    files = {f"{directory}/cpu.max": text for directory, text in limits.items()}
    cgroup = fake_cgroup_root(tmp_path / "cgroup", "0::/kubepods/pod1/ctr", files)
    monkeypatch.setenv("PYBACKEND_CGROUP_ROOT", str(cgroup))
    repo = tmp_path / "models"
    shutil.copytree(MODELS, repo)
    return TritonServer(repo, backend="ours", model_control_mode="explicit", **kwargs)


def env_seen(server: TritonServer, count: int, budget: str | None = None) -> dict:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        client.load_model("env_probe", config=config(count, budget))
        return json.loads(probe_answer(client, "env_probe", "ENV"))
    finally:
        client.unload_model("env_probe")
        client.close()


@pytest.fixture
def user_omp_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TritonServer]:
    """Our backend with the budget on (the default) and OMP_NUM_THREADS=3 set by the user."""
    with start(tmp_path, monkeypatch, env={"OMP_NUM_THREADS": "3"}) as server:
        yield server


@pytest.mark.parametrize("count", [1, 2])
def test_each_instance_gets_its_share_where_the_user_set_nothing(user_omp_server, count):
    share = str(max(1, CORES // count))
    seen = env_seen(user_omp_server, count=count)
    assert seen == {name: share for name in VARIABLES} | {"OMP_NUM_THREADS": "3"}


def test_more_instances_than_cores_still_get_one_thread(user_omp_server):
    seen = env_seen(user_omp_server, count=CORES + 1)
    assert seen == {name: "1" for name in VARIABLES} | {"OMP_NUM_THREADS": "3"}


def test_model_parameter_sets_or_turns_off_the_budget(user_omp_server):
    assert env_seen(user_omp_server, count=1, budget="5") == {name: "5" for name in VARIABLES} | {
        "OMP_NUM_THREADS": "3"
    }
    assert env_seen(user_omp_server, count=1, budget="off") == {
        name: None for name in VARIABLES
    } | {"OMP_NUM_THREADS": "3"}


def test_bad_model_parameter_fails_the_load(user_omp_server):
    with pytest.raises(InferenceServerException) as failure:
        env_seen(user_omp_server, count=1, budget="lots")
    assert (
        'model \'env_probe\': parameter THREAD_BUDGET must be "auto", "off" or a positive '
        "number of threads per instance, got 'lots'"
    ) in failure.value.message()


def test_backend_config_turns_it_off(tmp_path, monkeypatch):
    with start(tmp_path, monkeypatch, backend_config=["thread-budget=false"]) as server:
        assert env_seen(server, count=2) == {name: None for name in VARIABLES}
        # An explicit number in the model config still applies.
        assert env_seen(server, count=2, budget="2") == {name: "2" for name in VARIABLES}


@pytest.mark.skipif(CORES < 2, reason="a 1-CPU limit only shows where the affinity allows 2+")
def test_a_container_cpu_limit_caps_the_share(tmp_path, monkeypatch):
    # A Kubernetes limit of 0.5 CPU on the pod (the container itself unlimited): the affinity
    # still lists every core, the quota allows one core's worth.
    limits = {"kubepods/pod1": "50000 100000", "kubepods/pod1/ctr": "max 100000"}
    with start(tmp_path, monkeypatch, cpu_max=limits) as server:
        assert env_seen(server, count=1) == {name: "1" for name in VARIABLES}


def test_a_limit_above_the_affinity_changes_nothing(tmp_path, monkeypatch):
    limits = {"kubepods": f"{(CORES + 1) * 100000} 100000"}
    with start(tmp_path, monkeypatch, cpu_max=limits) as server:
        assert env_seen(server, count=1) == {name: str(CORES) for name in VARIABLES}
