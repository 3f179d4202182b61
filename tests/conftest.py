"""Shared fixtures: the backend under test, a session-wide server on the examples, clients,
and leak checks (no server/stub process and no /dev/shm file may outlive a test).

PYBACKEND_TEST_BACKEND=ours|original picks the backend for every test that starts a real
tritonserver (default: ours). Running the integration suite against the original backend
checks the tests themselves.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integration_support import EXAMPLES_REPOSITORY
from integration_support.clients import InferClient
from integration_support.leaks import leaks_since, server_processes, shm_files

if TYPE_CHECKING:
    from pybackend.server import TritonServer

BACKEND_ENV = "PYBACKEND_TEST_BACKEND"
VALID_BACKENDS = ("ours", "original")
#: Directories whose tests start real servers and therefore get the per-test leak check.
LEAK_CHECKED_DIRS = {
    "integration",
    "conformance",
    "reliability",
    "backend",
    "devserver",
    "gpu",
    "pytriton",
    "instances",
}


def selected_backend() -> str:
    value = os.environ.get(BACKEND_ENV, "ours").strip() or "ours"
    if value not in VALID_BACKENDS:
        raise pytest.UsageError(f"{BACKEND_ENV} must be one of {VALID_BACKENDS}, got {value!r}")
    return value


def pytest_report_header(config: pytest.Config) -> str:
    return f"pybackend: integration tests run against the {selected_backend()!r} backend"


# ---------------------------------------------------------------------------- leak checks
@pytest.fixture(scope="session", autouse=True)
def _session_leak_check() -> Iterator[None]:
    """Around the whole session, so it also sees what session-scoped servers left behind."""
    before_procs, before_shm = server_processes(), shm_files()
    yield
    problems = leaks_since(before_procs, before_shm)
    assert not problems, "the test session leaked:\n" + "\n".join(problems)


@pytest.fixture(autouse=True)
def _leak_check(request: pytest.FixtureRequest) -> Iterator[None]:
    """Integration/conformance tests must not leave servers, stubs or /dev/shm files behind.

    Servers of wider-scoped fixtures already run when the snapshot is taken (pytest sets up
    wider scopes first), so they are part of the baseline until their own fixture stops them.
    That holds for fixtures a test names in its signature (directly or through other
    fixtures), not for ones fetched later with request.getfixturevalue().
    """
    if not LEAK_CHECKED_DIRS.intersection(Path(str(request.node.path)).parts):
        yield
        return
    before_procs, before_shm = server_processes(), shm_files()
    yield
    problems = leaks_since(before_procs, before_shm)
    assert not problems, f"{request.node.nodeid} leaked:\n" + "\n".join(problems)


# ---------------------------------------------------------------------------- servers
@pytest.fixture(scope="session")
def backend_kind() -> str:
    """'ours' or 'original', from PYBACKEND_TEST_BACKEND (default 'ours')."""
    return selected_backend()


@pytest.fixture(scope="session")
def examples_server(backend_kind: str) -> Iterator[TritonServer]:
    """One tritonserver for the whole session, serving examples/model_repository."""
    from pybackend.server import TritonServer

    server = TritonServer(EXAMPLES_REPOSITORY, backend=backend_kind, ready_timeout=120.0)
    with server:
        yield server
    if backend_kind == "ours":
        assert not server.killed_stragglers, (
            f"stub processes outlived tritonserver and had to be killed: {server.killed_stragglers}"
        )


# ---------------------------------------------------------------------------- clients
@pytest.fixture
def http_client(examples_server: TritonServer) -> Iterator[object]:
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(url=examples_server.http_url, concurrency=16)
    yield client
    client.close()


@pytest.fixture
def grpc_client(examples_server: TritonServer) -> Iterator[object]:
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url=examples_server.grpc_url)
    yield client
    client.close()


@pytest.fixture(params=["http", "grpc"])
def client(request: pytest.FixtureRequest, examples_server: TritonServer) -> InferClient:
    """The examples server through each protocol in turn.

    examples_server is named here (not only reached through getfixturevalue) so that pytest
    starts it before the per-test leak check takes its snapshot.
    """
    import tritonclient.grpc as grpcclient
    import tritonclient.http as httpclient

    module = httpclient if request.param == "http" else grpcclient
    return InferClient(request.param, module, request.getfixturevalue(f"{request.param}_client"))
