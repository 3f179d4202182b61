"""The development server's logging extension against tritonserver 2.51's: the settings on
both protocols, every change and refusal with the same status and text, and (the dev
server's own part) which of a model's log records are echoed under them."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any, Tuple

import pytest
import tritonclient.grpc as grpcclient
from side_by_side import side_by_side

from pybackend.devserver.log_settings import LogSettings
from pybackend.devserver.server import _echo_new
from pybackend.testing.transport import LogRecord


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Tuple[Any, Any]]:
    with side_by_side(tmp_path_factory.mktemp("empty"), "inprocess") as pair:
        yield pair


def _http(server: Any, body: Any = None) -> Tuple[int, Any]:
    """(status, JSON answer) of GET /v2/logging, or of a POST of ``body`` (bytes as is)."""
    data = None if body is None else body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(f"http://{server.http_url}/v2/logging", data=data)
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def _grpc(server: Any, settings: dict) -> Any:
    client = grpcclient.InferenceServerClient(server.grpc_url)
    try:
        return client.update_log_settings(settings, as_json=True)["settings"]
    except Exception as e:  # noqa: BLE001 - the refusal is what is compared
        return str(e)
    finally:
        client.close()


# Each step in turn on both servers: settings persist from one to the next.
HTTP_STEPS = [
    None,
    {"log_verbose_level": 1, "log_info": False},
    {"log_format": "ISO8601", "unknown_key": 3},
    {"log_info": "yes"},
    {"log_verbose_level": -1},
    {"log_verbose_level": True},
    {"log_format": 8},
    {"log_format": "bogus"},
    {"log_file": "/tmp/x.log"},
    [1, 2],
    b"{not json",
    {"log_info": True, "log_verbose_level": 0, "log_format": "default"},
]
GRPC_STEPS = [
    {"log_verbose_level": 2, "log_warning": False},
    {"log_format": "bogus"},
    {"log_file": ""},
    {"log_warning": True, "log_verbose_level": 0},
]


def test_settings_changes_and_refusals_are_tritonservers(servers: Tuple[Any, Any]) -> None:
    real, dev = servers
    for step in HTTP_STEPS:
        got = _http(real, step)
        if isinstance(step, bytes):  # the parser's own words after the prefix differ
            assert got[0] == _http(dev, step)[0] == 500
            assert _http(dev, step)[1]["error"].startswith(
                "failed to parse the request JSON buffer: "
            )
            continue
        assert _http(dev, step) == got, step
    for step in GRPC_STEPS:
        assert _grpc(dev, step) == _grpc(real, step), step
    assert _http(dev) == _http(real)


def test_the_switches_choose_the_echoed_records(capsys: pytest.CaptureFixture[str]) -> None:
    model = SimpleNamespace(
        logs=[LogRecord(level, "model.py", 1, f"level {level}") for level in range(4)], output=[]
    )
    settings = LogSettings()
    _echo_new([0, 0], "m", model, settings)  # tritonserver's start: no VERBOSE
    assert [line.split(": ")[1] for line in capsys.readouterr().err.splitlines()] == [
        "level 0",
        "level 1",
        "level 2",
    ]
    settings.update({"log_verbose_level": 1, "log_info": False, "log_error": False})
    _echo_new([0, 0], "m", model, settings)
    assert [line.split(": ")[1] for line in capsys.readouterr().err.splitlines()] == [
        "level 1",
        "level 3",
    ]


def test_log_verbose_sets_the_starting_level(tmp_path: Any) -> None:
    """``devserve --log-verbose N``, as tritonserver's option of that name."""
    from pybackend.devserver import DevServer

    with DevServer(tmp_path, log_verbose=2, echo_logs=False) as dev:
        assert _http(dev)[1]["log_verbose_level"] == 2
