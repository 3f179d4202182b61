"""EXECUTION_ENV_PATH through the real server (spec section 5.1, UV-18/19/20): a model's stubs
run in the environment it names, a plain directory or a conda-pack style archive unpacked
once into a cache keyed by its content; what cannot work fails the load with the path and
the fix, and the server keeps serving its other models."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import venv
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integration_support.clients import probe_answer
from pybackend.execution_env import EnvError, prepare
from pybackend.server import TritonServer
from pybackend.server.locate import original_venv

REPORT_MODEL = """
import json, os, sys

import numpy as np

import triton_python_backend_utils as pb_utils

try:
    import envmarker
    MARKER = envmarker.WHO
except ImportError:
    MARKER = None


class TritonPythonModel:
    def execute(self, requests):
        seen = {
            "prefix": sys.prefix,
            "numpy": np.__version__,
            "numpy_file": np.__file__,
            "pb_utils_file": pb_utils.__file__,
            "marker": MARKER,
            "VIRTUAL_ENV": os.environ.get("VIRTUAL_ENV"),
            "PATH": os.environ.get("PATH", "").split(":")[0],
            "LD_LIBRARY_PATH": os.environ.get("LD_LIBRARY_PATH", "").split(":")[0],
            "PYTHONHOME": os.environ.get("PYTHONHOME"),
        }
        out = np.array([json.dumps(seen).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]) for _ in requests]
"""


CONFIG = """
backend: "python"
max_batch_size: 0
input [ { name: "IN", data_type: TYPE_INT32, dims: [ 1 ] } ]
output [ { name: "OUT", data_type: TYPE_STRING, dims: [ 1 ] } ]
"""


def write_model(repo: Path, name: str, env_path: str | None) -> Path:
    model = repo / name
    (model / "1").mkdir(parents=True)
    (model / "1" / "model.py").write_text(REPORT_MODEL)
    config = CONFIG
    if env_path is not None:
        config += (
            f'parameters {{ key: "EXECUTION_ENV_PATH" value {{ string_value: "{env_path}" }} }}\n'
        )
    (model / "config.pbtxt").write_text(config)
    return model


PURELIB = "import sysconfig; print(sysconfig.get_path('purelib'))"


def make_env(
    path: Path, marker: str | None, numpy_from: Path | None, symlinks: bool = False
) -> Path:
    """A relocatable venv (interpreter copied, no pip), or with `symlinks` what a plain
    `python3 -m venv` makes (bin/python3.X a link to the base interpreter's absolute path):
    `numpy_from` is made importable by a .pth file, `marker` by a module of its own."""
    venv.EnvBuilder(symlinks=symlinks, with_pip=False).create(path)
    site = Path(
        subprocess.run(
            [
                str(path / "bin" / "python3"),
                "-c",
                "import sysconfig; print(sysconfig.get_path('purelib'))",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    if numpy_from is not None:
        (site / "numpy_from.pth").write_text(f"{numpy_from}\n")
    if marker is not None:
        (site / "envmarker.py").write_text(f"WHO = {marker!r}\n")
    return path


def pack(env: Path, archive: Path, top: str | None = None) -> Path:
    """A tar.gz of `env` with its files at the top, as conda-pack writes it, or under `top`."""
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(env, arcname=top or ".")
    return archive


def server_numpy() -> Path:
    """The site-packages that holds this interpreter's numpy."""
    return Path(np.__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def packed_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_env(tmp_path_factory.mktemp("envs") / "packed", "packed", server_numpy())


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "models").mkdir()
    return tmp_path / "models"


@pytest.fixture
def server(repo: Path, tmp_path: Path) -> Iterator[TritonServer]:
    write_model(repo, "plain", None)
    cache = tmp_path / "cache"
    with TritonServer(
        repo, backend="ours", model_control_mode="explicit", env={"PYBACKEND_ENV_CACHE": str(cache)}
    ) as s:
        yield s


def load_and_report(server: TritonServer, name: str) -> dict:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        client.load_model(name)
        return json.loads(probe_answer(client, name, "OUT"))
    finally:
        client.close()


def load_error(server: TritonServer, name: str) -> str:
    client = httpclient.InferenceServerClient(server.http_url)
    try:
        with pytest.raises(InferenceServerException) as failure:
            client.load_model(name)
        # The failed load leaves the server serving its other models.
        assert load_and_report(server, "plain")["VIRTUAL_ENV"] is None
        return failure.value.message()
    finally:
        client.close()


def test_a_venv_directory_runs_the_stub_with_its_own_numpy(server, repo):
    """The numpy<2 environment the original's stub uses: our stub runs in it with its numpy
    1.x, not the server environment's numpy 2, as an activated environment would."""
    env = original_venv()
    write_model(repo, "in_venv", str(env))
    seen = load_and_report(server, "in_venv")
    assert seen["prefix"] == str(env)
    assert seen["numpy"].startswith("1.")
    assert seen["numpy_file"].startswith(str(env))
    assert seen["VIRTUAL_ENV"] == str(env)
    assert seen["PATH"] == str(env / "bin")
    assert seen["LD_LIBRARY_PATH"] == str(env / "lib")
    # pb_utils comes from pybackend's own directory, not the server env's site-packages.
    assert "site-packages" not in seen["pb_utils_file"]
    assert f"Using Python execution env {env}" in server.log_text()
    # A model without the parameter runs in the server's environment.
    assert load_and_report(server, "plain")["numpy"] == np.__version__


@pytest.mark.parametrize("top", [None, "packed"], ids=["conda-pack layout", "one top directory"])
def test_an_archive_is_unpacked_once_into_the_cache_and_shared(
    server, repo, tmp_path, packed_env, top
):
    archive = pack(packed_env, tmp_path / "env.tar.gz", top)
    # The same content under two names, one relative to the model directory, one through
    # $$TRITON_MODEL_DIRECTORY.
    shutil.copy(archive, write_model(repo, "first", "env.tar.gz") / "env.tar.gz")
    shutil.copy(
        archive, write_model(repo, "second", "$$TRITON_MODEL_DIRECTORY/env.tar.gz") / "env.tar.gz"
    )

    first = load_and_report(server, "first")
    second = load_and_report(server, "second")
    envs = tmp_path / "cache" / "envs"
    unpacked = [p for p in envs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    assert len(unpacked) == 1
    prefix = unpacked[0] if top is None else unpacked[0] / top
    for seen in (first, second):
        assert seen["marker"] == "packed"
        assert seen["prefix"] == str(prefix)
        assert seen["VIRTUAL_ENV"] == str(prefix)
    log = server.log_text()
    assert log.count(f"into {unpacked[0]} in ") == 1
    assert f"model 'second': EXECUTION_ENV_PATH: using {unpacked[0]}, unpacked earlier" in log

    # Reloading finds the copy as well.
    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("first")
    client.close()
    assert load_and_report(server, "first")["marker"] == "packed"
    assert server.log_text().count(f"into {unpacked[0]} in ") == 1


def test_an_archive_with_new_content_is_unpacked_again(server, repo, tmp_path):
    model = write_model(repo, "changing", "env.tar.gz")
    env = make_env(tmp_path / "env", "one", server_numpy())
    pack(env, model / "env.tar.gz")
    before = load_and_report(server, "changing")
    assert before["marker"] == "one"

    client = httpclient.InferenceServerClient(server.http_url)
    client.unload_model("changing")
    client.close()
    (marker,) = env.rglob("envmarker.py")
    marker.write_text("WHO = 'two'\n")
    pack(env, model / "env.tar.gz")
    after = load_and_report(server, "changing")
    assert after["marker"] == "two"
    assert after["prefix"] != before["prefix"]


def test_missing_path_fails_the_load_naming_it(server, repo):
    write_model(repo, "nowhere", "no/such/env")
    message = load_error(server, "nowhere")
    assert "model 'nowhere': EXECUTION_ENV_PATH" in message
    assert f"'{repo / 'nowhere' / 'no/such/env'}' does not exist" in message
    assert f"relative paths start at {repo / 'nowhere'}" in message


def test_a_directory_without_an_interpreter_fails_the_load(server, repo, tmp_path):
    (tmp_path / "notenv" / "lib").mkdir(parents=True)
    write_model(repo, "no_python", str(tmp_path / "notenv"))
    message = load_error(server, "no_python")
    assert f"EXECUTION_ENV_PATH '{tmp_path / 'notenv'}' has no bin/python3" in message


def test_an_environment_without_numpy_says_how_to_fix_it(server, repo, tmp_path):
    env = make_env(tmp_path / "bare", None, None)
    write_model(repo, "bare", str(env))
    message = load_error(server, "bare")
    assert "cannot import numpy" in message
    assert f"{env}/bin/python3 -m pip install numpy" in message
    assert "ModuleNotFoundError" not in message


def test_an_archive_reaching_outside_is_refused(server, repo, tmp_path):
    model = write_model(repo, "escaping", "env.tar.gz")
    evil = tmp_path / "evil.txt"
    evil.write_text("x")
    with tarfile.open(model / "env.tar.gz", "w:gz") as tar:
        tar.add(evil, arcname="../../evil-was-here.txt")
    message = load_error(server, "escaping")
    assert "model 'escaping': EXECUTION_ENV_PATH" in message
    assert "cannot be unpacked" in message
    assert not list(tmp_path.rglob("evil-was-here.txt"))


def test_an_archive_member_with_an_absolute_path_stays_inside(server, repo, tmp_path):
    """qa env's zipslip case with an absolute name: tarfile's data filter strips the leading
    '/', so the file lands in our cache directory, never at that path."""
    model = write_model(repo, "absolute", "env.tar.gz")
    target = tmp_path / "outside" / "abs-was-here.txt"
    source = tmp_path / "abs.txt"
    source.write_text("x")
    with tarfile.open(model / "env.tar.gz", "w:gz") as tar:
        tar.add(source, arcname=str(target))
    message = load_error(server, "absolute")
    # Unpacked (into the cache), then refused for what it lacks, not for where it writes.
    assert "has no bin/python3: it is not a Python environment" in message, message
    assert not target.exists()
    unpacked = list((tmp_path / "cache").rglob("abs-was-here.txt"))
    assert len(unpacked) == 1 and unpacked[0].read_text() == "x", unpacked


def test_a_file_that_is_no_archive_is_refused(server, repo):
    model = write_model(repo, "not_tar", "env.tar.gz")
    (model / "env.tar.gz").write_text("not an archive")
    message = load_error(server, "not_tar")
    assert f"EXECUTION_ENV_PATH '{model / 'env.tar.gz'}' cannot be unpacked" in message


def test_concurrent_unpacks_of_one_archive_share_one_copy(tmp_path, packed_env):
    """Instances and models load in parallel: one process unpacks, the others wait for it."""
    archive = pack(packed_env, tmp_path / "env.tar.gz")
    command = [
        sys.executable,
        "-m",
        "pybackend.execution_env",
        "--model-dir",
        str(tmp_path),
        "--cache",
        str(tmp_path / "cache"),
        str(archive),
    ]
    procs = [subprocess.Popen(command, stdout=subprocess.PIPE, text=True) for _ in range(4)]
    results = [json.loads(p.communicate()[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len({r["prefix"] for r in results}) == 1
    assert sum(r["note"].startswith("unpacked ") for r in results) == 1
    # The environments directory holds that one copy (and hidden bookkeeping) only.
    visible = [n for n in os.listdir(tmp_path / "cache" / "envs") if not n.startswith(".")]
    assert visible == [Path(results[0]["prefix"]).name]


def test_the_stubs_import_only_pybackend_from_the_servers_environment(tmp_path):
    """Where pybackend is installed as a wheel, the directory that holds it is the server
    environment's whole site-packages: the stubs of an execution environment get a
    directory of links to pybackend and pb_utils instead, so that environment's numpy wins."""
    site = tmp_path / "site-packages"
    for package in ("pybackend", "numpy"):
        (site / package).mkdir(parents=True)
    (site / "triton_python_backend_utils.py").write_text("")
    env = prepare(str(original_venv()), str(tmp_path), str(site), str(tmp_path / "cache"))
    root = Path(env.pythonpath)
    assert sorted(p.name for p in root.iterdir()) == ["pybackend", "triton_python_backend_utils.py"]
    assert (root / "pybackend").resolve() == site / "pybackend"
    # The next model finds the same directory.
    again = prepare(str(original_venv()), str(tmp_path), str(site), str(tmp_path / "cache"))
    assert again.pythonpath == env.pythonpath


def site_packages(python: Path) -> Path:
    return Path(
        subprocess.run(
            [str(python), "-c", PURELIB], check=True, capture_output=True, text=True
        ).stdout.strip()
    )


@pytest.mark.parametrize(
    "backend,keep_original_venv",
    [("ours", False), ("ours", True), ("original", True)],
    ids=["ours", "ours, venv still where it was made", "original"],
)
def test_an_archive_of_a_plain_venv_is_served(tmp_path, backend, keep_original_venv):
    """`python3 -m venv` links bin/python3.X to the absolute path of the interpreter it was
    made with (outside the archive). Both backends serve a tar.gz of it, and the model
    imports from the venv's site-packages. Ours runs the unpacked copy's interpreter link,
    so the copy is what is used, with nothing else needed. The original sources the copy's
    bin/activate, which names the directory the venv was made in: it uses the venv there
    (and silently none when that directory is gone; see docs/compatibility.md)."""
    env = make_env(tmp_path / "plainvenv", None, None, symlinks=True)
    interpreter = next(p for p in (env / "bin").iterdir() if p.name.startswith("python3."))
    assert os.path.isabs(os.readlink(interpreter))  # the case at hand
    site = site_packages(env / "bin" / "python3")
    if backend == "ours":
        numpy_from = server_numpy()
    else:
        numpy_from = site_packages(original_venv() / "bin" / "python3")
    (site / "numpy_from.pth").write_text(f"{numpy_from}\n")
    (site / "envmarker.py").write_text("WHO = 'plain venv site-packages'\n")
    repo = tmp_path / "models"
    model = write_model(repo, "venv_archive", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    pack(env, model / "env.tar.gz")
    if not keep_original_venv:
        shutil.rmtree(env)
    with TritonServer(
        repo,
        backend=backend,
        model_control_mode="explicit",
        env={"PYBACKEND_ENV_CACHE": str(tmp_path / "cache")},
    ) as server:
        seen = load_and_report(server, "venv_archive")
    assert seen["marker"] == "plain venv site-packages"
    if backend == "ours":
        assert seen["prefix"].startswith(str(tmp_path / "cache"))
        assert seen["VIRTUAL_ENV"] == seen["prefix"]
    else:
        assert seen["VIRTUAL_ENV"] == str(env)


def test_the_original_ignores_a_plain_venv_archive_whose_venv_was_moved(tmp_path):
    """Pins the original's side of the deviation above: the model loads, but runs in the
    stub's own environment (the archive's site-packages is not on its path)."""
    env = make_env(tmp_path / "plainvenv", None, None, symlinks=True)
    (site_packages(env / "bin" / "python3") / "envmarker.py").write_text("WHO = 'venv'\n")
    repo = tmp_path / "models"
    model = write_model(repo, "venv_archive", "$$TRITON_MODEL_DIRECTORY/env.tar.gz")
    pack(env, model / "env.tar.gz")
    shutil.rmtree(env)
    with TritonServer(repo, backend="original", model_control_mode="explicit") as server:
        seen = load_and_report(server, "venv_archive")
    assert seen["marker"] is None
    assert seen["VIRTUAL_ENV"] == str(env)


def _tar_with(archive: Path, members: list[tuple[str, str | None]]) -> Path:
    """A tar.gz of (name, link target) entries; a None target makes a small file."""
    import io

    with tarfile.open(archive, "w:gz") as tar:
        for name, target in members:
            info = tarfile.TarInfo(name)
            if target is None:
                data = b"x"
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.type = tarfile.SYMTYPE
                info.linkname = target
                tar.addfile(info)
    return archive


@pytest.mark.parametrize("top", ["", "venv/"], ids=["conda-pack layout", "one top directory"])
def test_a_venv_archive_whose_interpreter_is_missing_here_says_why(tmp_path, top):
    archive = _tar_with(
        tmp_path / "env.tar.gz",
        [
            (f"{top}pyvenv.cfg", None),
            (f"{top}bin/python3", "python3.11"),
            (f"{top}bin/python3.11", "/nowhere/python3.11"),
        ],
    )
    with pytest.raises(EnvError) as failure:
        prepare(str(archive), str(tmp_path), str(tmp_path), str(tmp_path / "cache"))
    message = str(failure.value)
    assert "is a link to /nowhere/python3.11, which does not exist on this machine" in message
    assert "python3 -m venv --copies" in message


@pytest.mark.parametrize(
    "members",
    [
        [("bin/python3", "/tmp"), ("bin/python3/escaped.txt", None)],
        [("lib/outside", "/etc")],
    ],
    ids=["written through an interpreter link", "another absolute link"],
)
def test_absolute_links_other_than_the_interpreter_stay_refused(tmp_path, members):
    archive = _tar_with(tmp_path / "env.tar.gz", members)
    with pytest.raises(EnvError) as failure:
        prepare(str(archive), str(tmp_path), str(tmp_path), str(tmp_path / "cache"))
    assert "cannot be unpacked" in str(failure.value)
    assert not Path("/tmp/escaped.txt").exists()
