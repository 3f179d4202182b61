"""Explicit model control helpers (load/unload and waiting for them) over HTTP."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

# The original aborts tritonserver intermittently when a model-control call fails
# (boost::interprocess::lock_exception, SIGABRT; docs/compatibility.md's model_control row):
# cases that take such an error path run against ours only, with their texts recorded from
# the original's runs where it survived.
ORIGINAL_ABORTS = pytest.mark.deviation(
    "the original aborts tritonserver intermittently on model-control error paths "
    "(boost::interprocess::lock_exception); same texts, no abort"
)


def http_client(server: Any) -> httpclient.InferenceServerClient:
    return httpclient.InferenceServerClient(
        server.http_url, connection_timeout=120.0, network_timeout=120.0
    )


def load(server: Any, name: str, config: dict[str, Any] | None = None) -> None:
    """Load (or reload) ``name``; ``config`` is a full config override (JSON object)."""
    client = http_client(server)
    try:
        client.load_model(name, config=json.dumps(config) if config is not None else None)
    finally:
        client.close()


def load_error(server: Any, name: str, config: dict[str, Any] | None = None) -> str:
    """Load a model that must fail; returns the server's message."""
    try:
        load(server, name, config)
    except InferenceServerException as exc:
        return without_load_context(exc.message())
    raise AssertionError(f"loading {name!r} unexpectedly succeeded")


#: What our backend adds after the original's load error text (UV-37; docs/compatibility.md):
#: the phase, model version and instance it happened in, and what to do.
_LOAD_CONTEXT = re.compile(
    r"\nThis happened in phase \w+ of model '[^']*' version \d+.*?Fix the error above, then "
    r"load the model again\.",
    re.S,
)


def without_load_context(message: str) -> str:
    """The load error as the original words it: our added context line removed, so one
    assertion holds for both backends."""
    return _LOAD_CONTEXT.sub("", message)


def model_states(server: Any, name: str) -> set[str]:
    """The states of the model's versions in the repository index (empty when it never was
    loaded). The index has one entry per version, so one state alone could hide a version
    that is still unloading."""
    client = http_client(server)
    try:
        index = client.get_model_repository_index()
    finally:
        client.close()
    return {e.get("state", "") for e in index if e["name"] == name}


def unloaded(server: Any, name: str, timeout: float = 30.0) -> None:
    """Wait until Triton reports every version of ``name`` unavailable (instances finalized)."""
    wait_for(lambda: model_states(server, name) <= {"UNAVAILABLE", ""}, timeout, f"unload {name}")


def unload(server: Any, name: str, timeout: float = 30.0) -> None:
    """Unload ``name`` and wait until it is unloaded (see ``unloaded``)."""
    client = http_client(server)
    try:
        client.unload_model(name)
    finally:
        client.close()
    unloaded(server, name, timeout)


def is_ready(server: Any, name: str, version: str = "") -> bool:
    client = http_client(server)
    try:
        return client.is_model_ready(name, version)
    finally:
        client.close()


def wait_for(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.1)


def model_config(server: Any, protocol: str, name: str) -> dict[str, Any]:
    """The model's config from the config endpoint, as a dict in the HTTP (JSON) shape.

    Over gRPC, int64 fields arrive as strings and default values are omitted; ``dims`` are
    turned back into ints so both protocols compare alike on the fields tests look at.
    """
    if protocol == "http":
        client = http_client(server)
        try:
            return client.get_model_config(name)
        finally:
            client.close()
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        config = client.get_model_config(name, as_json=True)["config"]
    finally:
        client.close()
    for tensor in config.get("input", []) + config.get("output", []):
        tensor["dims"] = [int(d) for d in tensor.get("dims", [])]
    return config
