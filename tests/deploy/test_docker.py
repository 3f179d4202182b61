"""docker/: both Dockerfiles are hadolint-clean (every rule, down to 'info'), both install
pybackend with docker/install.sh (the script `make test-wheel` runs on the host, so the image
recipe is exercised although no Docker engine runs here), and compose.yaml serves the examples
with a health check."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from deploy_tools import DIST_BIN, DOCKER, REPO, load_yaml, tool

DOCKERFILES = [DOCKER / "Dockerfile", DOCKER / "Dockerfile.cpu"]


def hadolint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [tool(DIST_BIN / "hadolint"), "--failure-threshold", "info", "--no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_clean(dockerfile: Path) -> None:
    done = hadolint(dockerfile)
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr


def test_hadolint_sees_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM ubuntu\nRUN apt-get install curl\n")
    done = hadolint(bad)
    assert done.returncode != 0
    assert "DL3006" in done.stdout and "DL3008" in done.stdout  # untagged image, unpinned apt


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_images_install_with_the_script_ci_runs(dockerfile: Path) -> None:
    text = dockerfile.read_text()
    assert re.search(r"^COPY dist/pybackend-\*-manylinux_\*\.whl docker/install\.sh ", text, re.M)
    (run,) = re.findall(r"^RUN .*?(?<!\\)$", text, re.M | re.S)
    assert "bash /tmp/pybackend/install.sh --prefix /opt/pybackend" in run
    assert re.search(r"^USER 1000:1000$", text, re.M)  # not root
    # the build context lets exactly what COPY names through
    ignore = (REPO / ".dockerignore").read_text().splitlines()
    assert "*" in ignore and "!docker/install.sh" in ignore
    assert "!dist/pybackend-*-manylinux_*.whl" in ignore


def test_ngc_image_replaces_the_python_backend() -> None:
    text = (DOCKER / "Dockerfile").read_text()
    assert re.search(r"^ARG RELEASE=24\.10$", text, re.M)
    assert "FROM nvcr.io/nvidia/tritonserver:${RELEASE}-py3" in text
    assert "--replace-backend /opt/tritonserver/backends" in text
    instructions = [line for line in text.splitlines() if not line.startswith("#")]
    assert not any("shm" in line for line in instructions)  # no /dev/shm sizing (memfd)


def test_cpu_image_serves_models_with_the_wheel_tritonserver() -> None:
    text = (DOCKER / "Dockerfile.cpu").read_text()
    assert re.search(r"^FROM python:\$\{PYTHON_VERSION\}-slim-bookworm$", text, re.M)
    assert '--tritonserver-wheel "${PYTRITON_VERSION}"' in text
    assert 'CMD ["pybackend", "serve", "/models"' in text


def test_compose_serves_the_examples_with_a_health_check() -> None:
    compose = load_yaml(DOCKER / "compose.yaml")
    assert isinstance(compose, dict)
    services = compose["services"]
    assert set(services) == {"pybackend", "pybackend-ngc"}
    for name, service in services.items():
        assert (DOCKER / service["build"]["context"] / service["build"]["dockerfile"]).is_file()
        assert "../examples/model_repository:/models:ro" in service["volumes"], name
        assert "8000:8000" in service["ports"] and "8001:8001" in service["ports"], name
        assert any("/v2/health/ready" in part for part in service["healthcheck"]["test"]), name
        assert "shm_size" not in service
    assert services["pybackend"]["build"]["dockerfile"] == "docker/Dockerfile.cpu"
    assert "profiles" not in services["pybackend"]  # the default needs no NGC login
