"""One root exception for pybackend's own errors: every part's class derives from
PybackendError under its old name and import path, so the CLI reports them alike."""

from __future__ import annotations

import pytest

from pybackend.devserver import ServeError
from pybackend.errors import ConfigError, PybackendError
from pybackend.execution_env import EnvError
from pybackend.ipc.arena import ArenaError
from pybackend.ipc.codec import ProtocolError
from pybackend.server import ServerError
from pybackend.stub import async_execute
from pybackend.stub.loader import LoadError
from pybackend.stub.parameters import ParameterError
from pybackend.testing import ConfigError as HarnessConfigError
from pybackend.testing import InferError
from pybackend.testing.metric_store import MetricError


@pytest.mark.parametrize(
    "cls",
    [
        ServeError,
        EnvError,
        ProtocolError,
        ServerError,
        LoadError,
        InferError,
        MetricError,
        ArenaError,
    ],
)
def test_each_part_s_error_is_a_pybackend_error(cls: type) -> None:
    assert issubclass(cls, PybackendError)


def test_the_two_config_errors_are_one_kind() -> None:
    # pybackend.testing's is the root's ConfigError itself; the stub's parameter errors
    # derive from it and stay ValueErrors, as the load failures they cause always were.
    assert HarnessConfigError is ConfigError
    assert issubclass(ParameterError, ConfigError)
    assert issubclass(ParameterError, ValueError)
    with pytest.raises(ConfigError, match="must be true or false"):
        async_execute.cancel_on_client_cancel(
            '{"parameters": {"PYBACKEND_ASYNC_EXECUTE_CANCEL": {"string_value": "maybe"}}}'
        )
    # ServerError is still the RuntimeError callers caught before.
    assert issubclass(ServerError, RuntimeError)


def test_arena_error_is_still_a_memory_error() -> None:
    # The stub's BLS calls (and model code) catch running out of shared memory as MemoryError.
    assert issubclass(ArenaError, MemoryError)
    with pytest.raises(MemoryError):
        raise ArenaError("could not reserve 1 byte")
