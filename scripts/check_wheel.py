"""check_wheel.py DIST_DIR: the built wheel, installed as an image installs it, serves.

Run by `make test-wheel` with .venv's Python (the client side: tritonclient and numpy). The
server side comes only from the wheel: docker/install.sh (the images' recipe) installs it, with
the nvidia-pytriton wheel's tritonserver, into a fresh virtual environment under a temporary
directory (--isolated: this machine's own site-packages stay out of sight, so a dependency the
wheel does not declare fails here), and replaces the python backend of a copy of an NGC-style
backends directory. Then, from a temporary working directory and with no path leading back to
the checkout:

- `pybackend --version` names the wheel's version, `pybackend backend-dir` a directory inside
  the new environment, and the stub's native helpers load;
- the NGC layout: backends/python is ours, the original is kept aside and in backends-original/;
- tritonserver serves a copy of examples/model_repository through that backends directory, one
  inference per example model (the decoupled one streamed over gRPC), and every stub runs the
  new environment's interpreter; `pybackend serve --check` (the CPU image's command) answers,
  and records that interpreter for the stubs where pip alone left none;
- a developer's install (docs/testing.md): `pip install 'pybackend[testing]'` into the same
  environment, `pybackend new`, and pytest runs the generated test in-process, in a stub
  process and through tritonserver (--pybackend-mode=inprocess,stub,server).

A file missing from the wheel or a broken install step fails `make test`.
"""

from __future__ import annotations

import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

REPO = Path(__file__).resolve().parent.parent
PYTRITON_VERSION = "0.7.0"
TIMEOUT = 180
STUB_MODULES = {b"pybackend.stub", b"pybackend.stub.host"}


def fail(message: str) -> None:
    raise SystemExit(f"check_wheel: FAILED: {message}")


def clean_env(tmp: Path) -> dict[str, str]:
    """The environment of a user's shell: nothing points at the checkout or at .venv."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYBACKEND_"))}
    env.pop("VIRTUAL_ENV", None)
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and str(REPO) not in p]
    env["PATH"] = os.pathsep.join(path)
    env["HOME"] = str(tmp / "home")  # no ~/.cache/pybackend from the checkout's runs
    env["PIP_CACHE_DIR"] = os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip"))
    return env


def run(cmd: list[str], cwd: Path, env: dict[str, str]) -> str:
    print("check_wheel: $", " ".join(cmd), flush=True)
    done = subprocess.run(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    if done.returncode != 0:
        fail(f"{cmd[0]} exited with {done.returncode}:\n{done.stdout}")
    return done.stdout


def ngc_backends(tmp: Path) -> Path:
    """A backends directory laid out like NGC's image: the original python backend (from the
    nvidia-pytriton wheel in .venv) and one other backend."""
    original = Path(REPO, ".venv").glob("lib/python3*/site-packages/pytriton/tritonserver")
    source = next(original) / "backends" / "python"
    backends = tmp / "opt" / "tritonserver" / "backends"
    shutil.copytree(source, backends / "python")
    (backends / "identity").mkdir()
    return backends


def check_layout(backends: Path, backend_dir: Path) -> None:
    if not (backends / "python").is_symlink():
        fail(f"{backends / 'python'} is not a link to our backend")
    if (backends / "python").resolve() != (backend_dir / "python").resolve():
        fail(f"{backends / 'python'} points to {(backends / 'python').resolve()}")
    original = backends / "python.original" / "libtriton_python.so"
    if (
        not original.is_file()
        or original.read_bytes() == (backend_dir / "python" / original.name).read_bytes()
    ):
        fail(f"NVIDIA's original backend is not kept at {original.parent}")
    farm = backends.parent / "backends-original"
    if (farm / "python").resolve() != original.parent.resolve():
        fail(f"{farm}/python does not lead to the original backend")
    if (farm / "identity").resolve() != (backends / "identity").resolve():
        fail(f"{farm}/identity does not lead to the shipped identity backend")


@contextmanager
def serving(cmd: list[str], cwd: Path, env: dict[str, str]) -> Iterator[tuple[str, int]]:
    """Run `pybackend serve ...` until its banner names the gRPC endpoint; yield it and the pid."""
    print("check_wheel: $", " ".join(cmd), flush=True)
    proc = subprocess.Popen(
        cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line)
        lines.put("")

    threading.Thread(target=pump, daemon=True).start()
    grpc_url = None
    deadline = time.monotonic() + TIMEOUT
    try:
        while grpc_url is None:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                fail("no banner within %d s:\n%s" % (TIMEOUT, "".join(log)))
            if not line:
                fail(f"serve exited with {proc.wait()}:\n{''.join(log)}")
            log.append(line)
            match = re.match(r"\s+gRPC\s+(\S+)", line)
            grpc_url = match.group(1) if match else None
        yield grpc_url, proc.pid
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            fail("serve did not stop within 60 s of SIGINT")


def stub_interpreters(root: int) -> set[str]:
    """The executables of the stubs (`python -m pybackend.stub`, and `pybackend.stub.host`
    for a model whose instances share a process) among root's descendants."""
    children: dict[int, list[int]] = {}
    argvs: dict[int, list[bytes]] = {}
    for pid in map(int, filter(str.isdigit, os.listdir("/proc"))):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            argvs[pid] = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(parent, []).append(pid)
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        if STUB_MODULES.intersection(argvs.get(pid, [])):
            found.add(argvs[pid][0].decode())
    return found


def leftovers(prefix: Path, wait: float = 10.0) -> list[str]:
    """Command lines of processes still running from prefix (servers, stubs), after a grace."""
    deadline = time.monotonic() + wait
    while True:
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if any(arg.startswith(str(prefix).encode()) for arg in argv[:2]):
                found.append(b" ".join(argv).decode(errors="replace"))
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def infer_each_example(url: str) -> None:
    client = grpcclient.InferenceServerClient(url)

    def infer(model: str, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        tensors = []
        for name, value in inputs.items():
            dtype = "BYTES" if value.dtype == np.object_ else {np.float32: "FP32"}[value.dtype.type]
            tensor = grpcclient.InferInput(name, list(value.shape), dtype)
            tensor.set_data_from_numpy(value)
            tensors.append(tensor)
        result = client.infer(model, tensors, client_timeout=60)
        outputs = result.get_response().outputs
        return {o.name: result.as_numpy(o.name) for o in outputs}

    a = np.array([1, 2, 3, 4], np.float32)
    b = np.array([10, 20, 30, 40], np.float32)
    text = np.array([b"hello world"], np.object_)
    checks: dict[str, Callable[[], bool]] = {
        "add_sub": lambda: (
            lambda o: np.array_equal(o["OUTPUT0"], a + b) and np.array_equal(o["OUTPUT1"], a - b)
        )(infer("add_sub", {"INPUT0": a, "INPUT1": b})),
        "string_echo": lambda: (
            infer("string_echo", {"INPUT0": np.array([[b"ab", b"xyz"]], np.object_)})[
                "OUTPUT1"
            ].tolist()
            == [[b"ba", b"zyx"]]
        ),
        "batched_scale": lambda: np.array_equal(
            infer("batched_scale", {"INPUT0": a[None]})["OUTPUT0"], 2 * a[None]
        ),
        "stacked_scale": lambda: np.array_equal(
            infer("stacked_scale", {"INPUT0": np.ones((1, 8), np.float32)})["OUTPUT0"],
            np.arange(1, 9, dtype=np.float32)[None],
        ),
        "bls_preprocess": lambda: np.array_equal(
            infer("bls_preprocess", {"TEXT": text})["FEATURES"], np.array([10, 0, 1, 0], np.float32)
        ),
        "bls_postprocess": lambda: (
            infer("bls_postprocess", {"SCORES": a})["LABEL"].tolist() == [b"other"]
        ),
        "bls_pipeline": lambda: (
            infer("bls_pipeline", {"TEXT": text, "WEIGHTS": np.zeros(4, np.float32)})[
                "LABEL"
            ].tolist()
            == [b"letters"]
        ),
        "bls_async_fanout": lambda: np.array_equal(
            infer("bls_async_fanout", {"INPUT0": a, "INPUT1": b})["SUMS"],
            np.stack([a + k * b for k in (1, 2, 3)]),
        ),
        "error_model": partial(expect_model_error, infer),
        "token_stream": partial(stream_tokens, url),
        "running_sum": partial(running_sums, client),
        "text_generation": partial(generated_text, url),
        "text_embedding": partial(embedded, infer),
        "shared_weights": partial(projected, infer),
    }
    models = sorted(
        p.parent.name for p in (REPO / "examples/model_repository").glob("*/config.pbtxt")
    )
    if sorted(checks) != models:
        fail(f"the example models {models} and the checks {sorted(checks)} differ")
    for model, check in checks.items():
        if not check():
            fail(f"{model} gave a wrong answer")
        print(f"check_wheel: {model}: answered", flush=True)


def running_sums(client: grpcclient.InferenceServerClient) -> bool:
    """A sequence of three requests (START, -, END): the running sums 3, 7, 12."""
    sums = []
    for i, value in enumerate((3, 4, 5)):
        given = grpcclient.InferInput("VALUE", [1, 1], "INT64")
        given.set_data_from_numpy(np.array([[value]], np.int64))
        result = client.infer(
            "running_sum",
            [given],
            sequence_id=41,
            sequence_start=i == 0,
            sequence_end=i == 2,
            client_timeout=60,
        )
        sums.append(int(result.as_numpy("SUM")[0, 0]))
    return sums == [3, 7, 12]


def expect_model_error(infer: Callable[..., dict]) -> bool:
    try:
        infer("error_model", {"INPUT0": np.ones(3, np.float32)})
    except InferenceServerException as exc:
        return "error_model refuses every request (first one had 3 values)" in str(exc)
    return False


def streamed(url: str, model: str, inputs: dict[str, tuple[str, np.ndarray]]) -> list:
    """A decoupled model's responses over gRPC, up to its final flag (which is not kept)."""
    responses: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    client.start_stream(callback=lambda result, error: responses.put(error or result))
    try:
        tensors = []
        for name, (dtype, value) in inputs.items():
            tensor = grpcclient.InferInput(name, list(value.shape), dtype)
            tensor.set_data_from_numpy(value)
            tensors.append(tensor)
        client.async_stream_infer(model, tensors, enable_empty_final_response=True)
        got = []
        while True:
            item = responses.get(timeout=60)
            if isinstance(item, Exception):
                fail(f"{model}: {item}")
            if item.get_response().parameters["triton_final_response"].bool_param:
                return got
            got.append(item)
    finally:
        client.stop_stream()


def stream_tokens(url: str) -> bool:
    prompt = np.array([b"the quick fox"], np.object_)
    words = [
        item.as_numpy("TOKEN")[0].decode().strip()
        for item in streamed(url, "token_stream", {"PROMPT": ("BYTES", prompt)})
    ]
    return words == ["Fox", "Quick", "The"]  # the model replies with the words reversed


def generated_text(url: str) -> bool:
    """text_generation (the OpenAI endpoint's example, docs/openai.md) streamed over gRPC as
    the endpoint asks: its words one response each, the last with its finish reason."""
    inputs = {
        "text_input": ("BYTES", np.array([b"the quick fox"], np.object_)),
        "stream": ("BOOL", np.array([True])),
        "sampling_parameters": ("BYTES", np.array([b'{"max_tokens": 2}'], np.object_)),
    }
    items = streamed(url, "text_generation", inputs)
    pieces = [item.as_numpy("text_output")[0].decode() for item in items]
    reasons = [item.as_numpy("finish_reason")[0].decode() for item in items]
    return pieces == ["Fox", " Quick"] and reasons == ["", "length"]


def embedded(infer: Callable[..., dict]) -> bool:
    """text_embedding (the endpoint's embeddings example): a unit vector of 64 per text,
    closer for texts that share words."""

    def vector(text: bytes) -> np.ndarray:
        given = {"text_input": np.array([[text]], np.object_)}
        return infer("text_embedding", given)["embedding"][0]

    cat, cats, other = vector(b"the cat sat"), vector(b"a cat sat down"), vector(b"stock fell")
    return (
        cat.shape == (64,)
        and abs(float(np.linalg.norm(cat)) - 1) < 1e-5
        and (cat @ cats > cat @ other)
    )


def projected(infer: Callable[..., dict]) -> bool:
    """shared_weights (two instances, one process): FEATURES @ its weights, exact (the weights
    are eighths from a frozen RandomState stream, the features small integers), and the
    instance that served it named on each row."""
    weights = np.random.RandomState(2048).randint(-8, 9, size=(2048, 2048)) / 8
    rows = (np.arange(2 * 2048) % 33 - 16).reshape(2, 2048).astype(np.float32)
    out = infer("shared_weights", {"FEATURES": rows})
    exact = np.array_equal(out["PROJECTED"], rows @ weights.astype(np.float32))
    return exact and set(out["INSTANCE"].ravel()) <= {b"shared_weights_0_0", b"shared_weights_0_1"}


def check_developer_flow(prefix: Path, wheel: Path, tmp: Path, env: dict[str, str]) -> str:
    """docs/testing.md's promise, from the installed wheel alone: `pip install
    'pybackend[testing]'`, `pybackend new`, and pytest runs the generated test offline, in a
    stub process and through tritonserver (the environment's, from the nvidia-pytriton wheel)
    with the wheel's backend. Returns pytest's summary line."""
    python = str(prefix / "bin" / "python3")
    pip = [python, "-m", "pip", "install", "--disable-pip-version-check", "-q"]
    run([*pip, f"{wheel}[testing]"], tmp, env)
    project = tmp / "project"
    project.mkdir()
    run([str(prefix / "bin" / "pybackend"), "new", "models/add_one"], project, env)
    modes = "--pybackend-mode=inprocess,stub,server"
    out = run(
        [python, "-m", "pytest", "-q", "-p", "no:cacheprovider", modes, "models"], project, env
    )
    summary = out.strip().splitlines()[-1]
    if not re.search(r"\b\d+ passed\b", summary) or re.search(r"failed|skipped|error", summary):
        fail(f"the generated model's test in the three modes: {summary}\n{out}")
    # The OpenAI endpoint's package is in the wheel (its client, tritonclient, came with the
    # testing extra).
    run([python, "-c", "from pybackend.openai_api import OpenAIServer"], tmp, env)
    return summary


def main() -> None:
    dist = Path(sys.argv[1]).resolve()
    wheels = sorted(dist.glob("pybackend-*-manylinux_*.whl"))
    if len(wheels) != 1:
        fail(f"expected one manylinux pybackend wheel in {dist}, found {wheels}")
    version = wheels[0].name.split("-")[1]
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="pybackend-wheel-") as scratch:
        tmp = Path(scratch)
        env = clean_env(tmp)
        prefix = tmp / "pybackend"
        backends = ngc_backends(tmp)
        install = [
            "bash",
            str(REPO / "docker" / "install.sh"),
            *("--prefix", str(prefix), "--tritonserver-wheel", PYTRITON_VERSION, "--isolated"),
            *("--replace-backend", str(backends), str(wheels[0])),
        ]
        run(install, tmp, env)
        pybackend = str(prefix / "bin" / "pybackend")
        reported = run([pybackend, "--version"], tmp, env).strip()
        if reported != f"pybackend {version}":
            fail(f"`pybackend --version` says {reported!r}, the wheel is {version}")
        backend_dir = Path(run([pybackend, "backend-dir"], tmp, env).strip())
        if not backend_dir.is_relative_to(prefix):
            fail(f"`pybackend backend-dir` gives {backend_dir}, outside {prefix}")
        check_layout(backends, backend_dir)
        # The stub's BYTES helpers are optional at run time (a Python path exists), so only
        # this check notices a wheel without them.
        probe = "from pybackend.utils import native; raise SystemExit(native.helpers is None)"
        run([str(prefix / "bin" / "python3"), "-c", probe], tmp, env)

        models = tmp / "models"
        shutil.copytree(REPO / "examples" / "model_repository", models)
        ports = ("--http-port", "0", "--grpc-port", "0", "--metrics-port", "0")
        serve = [pybackend, "serve", str(models), "--backend", str(backends), *ports]
        with serving(serve, tmp, env) as (url, serve_pid):
            infer_each_example(url)
            interpreters = stub_interpreters(serve_pid)
            if not interpreters or interpreters != {str(prefix / "bin" / "python3")}:
                fail(f"the stubs run {interpreters}, not {prefix}/bin/python3")
        # A wheel installed by pip alone has no python_executable: the launcher writes it.
        record = backend_dir / "python" / "python_executable"
        record.unlink()
        run([pybackend, "serve", str(models), *ports, "--check"], tmp, env)
        if record.read_text().strip() != str(prefix / "bin" / "python3"):
            fail(f"`pybackend serve` recorded {record.read_text()!r} as the stubs' interpreter")
        developer = check_developer_flow(prefix, wheels[0], tmp, env)
        print(f"check_wheel: pybackend[testing], `pybackend new`, pytest: {developer}", flush=True)
        left = leftovers(prefix)
        if left:
            fail(f"processes of {prefix} outlived serve: {left}")
    print(
        f"check_wheel: {wheels[0].name}: installed, served, OK ({time.monotonic() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()
