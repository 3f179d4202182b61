"""`fork` and `shared` with a model.py that imports torch (CPU) at module level and builds
and multiplies its weights there (models/torch_ops), as torch models do."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from instances_support import (
    OP_IDENT,
    at_once,
    config,
    host_and_children,
    imports,
    make_server,
    settled,
    unloading_client,
)

from conformance_support.stub_env import needs_torch, our_stub_python
from pybackend.server import TritonServer

pytestmark = needs_torch(our_stub_python())

MODEL = "torch_ops"
COUNT = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    with make_server(tmp_path_factory.mktemp("torch")) as s:
        yield s


@pytest.fixture
def client(server: TritonServer) -> Iterator[Any]:
    (server.model_repository / MODEL / "1" / "imports.log").unlink(missing_ok=True)
    yield from unloading_client(server, MODEL)


def served(server: TritonServer, n: int) -> list[dict[str, Any]]:
    answers = at_once(server.http_url, OP_IDENT, n, MODEL)
    assert all(isinstance(a, dict) for a in answers), answers
    for a in answers:
        # The children compute with the weights the import built (same product, up to the
        # order in which threads sum).
        assert a["sum"] == pytest.approx(a["warm"], rel=1e-5)
        assert a["cuda_initialized"] is False
    return answers


def test_fork_imports_torch_once_and_every_child_serves(server: TritonServer, client: Any):
    client.load_model(MODEL, config=config("fork", COUNT))
    host, children = host_and_children(server, COUNT + 1)
    assert len(children) == COUNT
    assert imports(server, MODEL) == [host]  # torch imported by the host only, before forks
    answers = served(server, 4 * COUNT)
    assert {a["pid"] for a in answers} <= children
    assert {a["instance"] for a in answers} <= {f"{MODEL}_0_{i}" for i in range(COUNT)}
    # torch in a child sizes its threads from the OMP_NUM_THREADS the host got (the thread
    # budget's share, or the user's value).
    for a in answers:
        if a["omp_num_threads"]:
            assert a["num_threads"] == int(a["omp_num_threads"]), a


def test_shared_instances_share_torchs_thread_count(server: TritonServer, client: Any):
    # Instance i calls torch.set_num_threads(1 + i) in initialize: one process, one setting.
    client.load_model(MODEL, config=config("shared", COUNT, params={"TORCH_THREADS": "1"}))
    (host,) = settled(server, 1)
    assert imports(server, MODEL) == [host]
    answers = served(server, 4 * COUNT)
    assert {a["pid"] for a in answers} == {host}
    counts = {a["num_threads"] for a in answers}
    # Process-wide: every instance's thread sees the one value the last initialize set.
    assert len(counts) == 1 and counts <= {1, 2}, answers
