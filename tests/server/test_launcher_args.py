"""TritonServer's argument handling, without starting a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from pybackend.server import TritonServer, original_backend_dir
from pybackend.server.processes import free_ports
from pybackend.server.tritonserver import _backend_config_arg


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ("shm-default-byte-size=1048576", "python,shm-default-byte-size=1048576"),
        ("python,shm-growth-byte-size=1", "python,shm-growth-byte-size=1"),
        ("onnxruntime,x=1", "onnxruntime,x=1"),
        ("shm-region-prefix-name=a,b", "python,shm-region-prefix-name=a,b"),
        (("stub-timeout-seconds", "5"), "python,stub-timeout-seconds=5"),
    ],
)
def test_backend_config_forms(given: object, expected: str) -> None:
    assert _backend_config_arg(given) == expected  # type: ignore[arg-type]


def test_free_ports_are_distinct() -> None:
    ports = free_ports(8)
    assert len(set(ports)) == 8 and all(0 < p < 65536 for p in ports)


def test_missing_repository_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        TritonServer(tmp_path / "nothing-here")


def test_backend_directory_without_library_is_refused(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="libtriton_python.so"):
        TritonServer(tmp_path, backend=tmp_path)


def test_original_backend_dir_layout() -> None:
    backends = original_backend_dir()
    names = {p.name for p in (backends / "python").iterdir()}
    assert {
        "libtriton_python.so",
        "triton_python_backend_utils.py",
        "triton_python_backend_stub",
    } <= names
    assert original_backend_dir() == backends  # cached


def test_command_line(tmp_path: Path) -> None:
    server = TritonServer(
        tmp_path,
        backend=original_backend_dir(),
        model_control_mode="explicit",
        load_models=["a", "b"],
        backend_config=["shm-default-byte-size=4194304"],
        extra_args=["--log-verbose=1"],
    )
    env = server._environment()
    command = server._build_command(env["LD_LIBRARY_PATH"])
    assert "--model-control-mode=explicit" in command
    assert command.count("--load-model=a") == 1 and "--load-model=b" in command
    assert "--backend-config=python,shm-default-byte-size=4194304" in command
    assert command[-1] == "--log-verbose=1"
    assert "--http-address=127.0.0.1" in command and "--grpc-address=127.0.0.1" in command
    assert any(arg.startswith("--exit-timeout-secs=") for arg in command)
    assert "nvidia_pytriton.libs" in env["LD_LIBRARY_PATH"]


def test_metrics_interval(tmp_path: Path) -> None:
    # A launcher's servers poll metrics often: tritonserver's stop waits for the poll.
    def command(**kwargs: object) -> list[str]:
        server = TritonServer(tmp_path, **kwargs)  # type: ignore[arg-type]
        return server._build_command(server._environment()["LD_LIBRARY_PATH"])

    assert "--metrics-interval-ms=100" in command()
    # `pybackend serve` keeps Triton's default; the caller's own flag wins.
    assert not [a for a in command(metrics_interval_ms=None) if "metrics-interval" in a]
    given = command(extra_args=["--metrics-interval-ms=5000"])
    assert [a for a in given if "metrics-interval" in a] == ["--metrics-interval-ms=5000"]
