"""The models of a repository as the development server holds them: each Python model
started once, in a stub process of its own (:class:`StubModel`, the default) or in this
process (:class:`ModelHarness`, where ``breakpoint()`` in model.py stops in the terminal),
with what failed to load kept beside, so the server can say why a model is missing."""

from __future__ import annotations

import sys
import threading
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

from ..testing.config import load_config
from ..testing.harness import ModelHarness, forget_imports
from ..testing.stub_model import StubModel
from ..utils.config_rules import other_backend
from ..utils.errors import ErrorCode
from ..utils.helpers import using_decoupled_model_transaction_policy
from .errors import ServeError
from .tensors import declared_types, wire_name

UNLOADED = "unloaded"
STOP_WAIT_S = 60.0  # how long stopping a model waits for the requests using it


@dataclass
class Served:
    """One model directory: its instances (a harness each) when it loaded, else why not."""

    name: str
    directory: Path
    instances: List[Any] = field(default_factory=list)
    version: Optional[int] = None
    reason: str = ""
    in_process: bool = False
    skipped: bool = False  # not a Python model: listed, never loaded
    signature: Tuple[int, int] = (0, 0)  # files_signature() when it was loaded
    batcher: Any = None  # its dynamic batcher (inference.py), from the first request on
    config: Dict[str, Any] = field(default_factory=dict)  # as the model was started with
    lock: threading.Lock = field(default_factory=threading.Lock)
    # Per instance: log records and output lines printed so far.
    shown: Dict[int, List[int]] = field(default_factory=dict)
    busy: List[int] = field(default_factory=list)  # per instance: requests using it now
    # Requests using the model now; stopping it waits for them (use()).
    users: int = 0
    stopping: bool = False
    idle: threading.Condition = field(default_factory=threading.Condition)

    @property
    def model(self) -> Any:
        """The first instance (what the model's configuration and metrics are read from),
        None when it is not loaded."""
        return self.instances[0] if self.instances else None

    @property
    def ready(self) -> bool:
        return bool(self.instances) and not self.stopping

    @contextmanager
    def instance(self, correlation_id: Any = None) -> Iterator[Any]:
        """An instance for one request, as tritonserver's schedulers pick one: the least
        busy, or for a model with a sequence batcher, the one a sequence's correlation id
        stays on (its state lives there). A stub that died is replaced first."""
        with self.lock:
            if not self.instances:
                raise ServeError(
                    f"model '{self.name}' was unloaded while the request came in: send it again",
                    ErrorCode.UNAVAILABLE,
                )
            if correlation_id and "sequence_batching" in self.config:
                index = _stable_hash(correlation_id) % len(self.instances)
            else:
                index = min(range(len(self.instances)), key=self.busy.__getitem__)
            revive(self, index)
            self.busy[index] += 1
            model = self.instances[index]
        try:
            yield model
        finally:
            with self.lock:
                self.busy[index] -= 1

    @property
    def decoupled(self) -> bool:
        return bool(using_decoupled_model_transaction_policy(self.config))

    @contextmanager
    def use(self) -> Iterator[None]:
        """Around a request: the model is not stopped (unloaded, reloaded) under it."""
        with self.idle:
            if not self.ready:
                raise ServeError(
                    f"model '{self.name}' was unloaded or reloaded while the request came in: "
                    "send it again",
                    ErrorCode.UNAVAILABLE,
                )
            self.users += 1
        try:
            yield
        finally:
            with self.idle:
                self.users -= 1
                self.idle.notify_all()

    def drain(self, timeout: float = STOP_WAIT_S) -> None:
        """Refuse new requests and wait (bounded) for those using the model to finish."""
        with self.idle:
            self.stopping = True
            self.idle.wait_for(lambda: self.users == 0, timeout)


def not_python(directory: Path) -> str:
    """Why the model in ``directory`` is not one this server runs ("" when it is: a Python
    backend config, or a ``model.py`` in a version directory with no backend named, left
    to ``auto_complete_config``). A config that does not parse is left to the load, which
    reports it."""
    if not (directory / "config.pbtxt").is_file():
        has_model_py = any(p.is_dir() and (p / "model.py").is_file() for p in directory.iterdir())
        return "" if has_model_py else "no config.pbtxt and no <version>/model.py"
    try:
        config = load_config(directory)
    except Exception:  # noqa: BLE001 - reported by the load
        return ""
    backend = other_backend(config)  # the rule `pybackend validate` skips models by
    if not backend:
        return ""
    return (
        f"the development server runs Python models only (this one is for '{backend}'); "
        "serve the repository with tritonserver (pybackend serve) for the others"
    )


class ServedModels:
    """Loads every Python model under ``repository`` (sorted by name, as BLS callers are
    usually found after their targets only by chance) and finds them by name."""

    def __init__(self, repository: Union[str, Path], *, in_process: bool = False) -> None:
        self.repository = Path(repository).resolve()
        if not self.repository.is_dir():
            raise FileNotFoundError(f"model repository '{self.repository}' is not a directory")
        self.in_process = in_process
        self.models: Dict[str, Served] = {}

    def load(self) -> "ServedModels":
        for directory in sorted(p for p in self.repository.iterdir() if p.is_dir()):
            if directory.name.startswith("."):
                continue
            reason = not_python(directory)
            if reason:  # listed in the index with the reason; not counted for readiness
                self.models[directory.name] = Served(
                    directory.name, directory, reason=reason, skipped=True
                )
                continue
            self.models[directory.name] = start_model(directory, self.in_process)
        return self

    def load_model(self, name: str) -> None:
        """``POST /v2/repository/models/<name>/load``: (re)load the model from its directory,
        reading its files as they are now. As tritonserver does, the loaded version keeps
        serving until the new one is ready, and keeps serving if the new one fails."""
        directory = self.repository / name
        if not directory.is_dir():
            raise ServeError(f"failed to load '{name}', failed to poll from model repository")
        reason = not_python(directory)
        if reason:
            raise ServeError(f"failed to load '{name}': {reason}", ErrorCode.UNSUPPORTED)
        if self.in_process:
            for version_dir in directory.iterdir():
                forget_imports(version_dir)
        served = start_model(directory, self.in_process)
        old = self.models.get(name)
        if not served.ready and old is not None and old.ready:
            old.signature = served.signature  # this edit was tried: no retry until the next
            raise ServeError(
                f"load failed for model '{name}': {served.reason} (the loaded version "
                "keeps serving)",
                ErrorCode.INVALID_ARG,
            )
        self.models[name] = served
        if old is not None:
            self._stop(old)
        if not served.ready:
            raise ServeError(
                f"load failed for model '{name}': {served.reason}", ErrorCode.INVALID_ARG
            )

    def unload_model(self, name: str) -> None:
        """``POST /v2/repository/models/<name>/unload``: finalize it; it stays listed."""
        served = self.models.get(name)
        if served is not None and served.instances:
            served.reason = UNLOADED  # what a request meanwhile is told
            self._stop(served)

    @staticmethod
    def _stop(served: Served) -> None:
        served.drain()
        # The batcher first: closing it answers what it holds, with the model still there
        # (its batches take the lock to find the model, so nothing is closed under it).
        with served.lock:
            batcher, served.batcher = served.batcher, None
        if batcher is not None:
            batcher.close()
        with served.lock:
            instances, served.instances = served.instances, []
        for model in reversed(instances):
            model.close()

    def changed(self) -> List[str]:
        """The models whose files changed since they were loaded (``--reload``)."""
        return [
            s.name
            for s in self.models.values()
            if not s.skipped and s.signature != files_signature(s.directory)
        ]

    def close(self) -> None:
        for served in reversed(list(self.models.values())):
            self._stop(served)

    @property
    def all_ready(self) -> bool:
        """Every Python model loaded (the others are never served here)."""
        return all(s.ready for s in self.models.values() if not s.skipped)

    def get(self, name: str, version: Optional[str] = None) -> Served:
        """The loaded model, or the server's NOT_FOUND for an unknown name or version (with
        the load error where it failed to load)."""
        served = self.models.get(name)
        if served is None or not served.ready:
            text = f"Request for unknown model: '{name}' is not found"
            if served is not None:
                plain = served.skipped or served.reason == UNLOADED
                text += f" ({served.reason})" if plain else f" (it failed to load: {served.reason})"
            raise ServeError(text, ErrorCode.NOT_FOUND)
        if version not in (None, "", str(served.version)):
            raise ServeError(
                f"Request for unknown model: '{name}' version {version} is not found",
                ErrorCode.NOT_FOUND,
            )
        return served

    def index(self) -> List[Dict[str, Any]]:
        """``POST /v2/repository/index``: every model, READY or UNAVAILABLE with the reason."""
        out: List[Dict[str, Any]] = []
        for served in self.models.values():
            entry: Dict[str, Any] = {"name": served.name}
            if served.version is not None:
                entry["version"] = str(served.version)
            entry["state"] = "READY" if served.ready else "UNAVAILABLE"
            if not served.ready:
                entry["reason"] = served.reason
            out.append(entry)
        return out


def files_signature(directory: Path) -> Tuple[int, int]:
    """(newest modification time, number of files) under a model directory, bytecode
    caches aside: any edit, new or deleted file changes it."""
    newest, count = 0, 0
    for path in directory.rglob("*"):
        if "__pycache__" in path.parts or not path.is_file():
            continue
        try:
            newest = max(newest, path.stat().st_mtime_ns)
        except OSError:
            continue  # removed meanwhile
        count += 1
    return newest, count


def start_model(directory: Path, in_process: bool) -> Served:
    """The model in ``directory``, started with every instance its ``instance_group`` asks
    for; or, where it failed, why."""
    served = Served(directory.name, directory, in_process=in_process)
    served.signature = files_signature(directory)
    try:
        config = load_config(directory)
        served.name = str(config.get("name") or directory.name)
        first = _start_instance(served, None, None)
        served.instances.append(first)
        served.version = first.version
        served.config = first.config
        for name in instance_names(first.config)[1:]:
            served.instances.append(_start_instance(served, name, first))
    except Exception as e:  # noqa: BLE001 - config errors, and model code may raise anything
        for model in reversed(served.instances):
            model.close()
        served.instances = []
        served.reason = str(e) or type(e).__name__
        print(
            f"pybackend devserver: model '{served.name}' failed to load: {served.reason}",
            file=sys.stderr,
            flush=True,
        )
    served.busy = [0] * len(served.instances)
    return served


def _start_instance(served: Served, instance_name: Optional[str], first: Any) -> Any:
    """One instance, started. Those after the first (and a restarted one) take its
    completed config, statistics and (stub processes) metrics registry: the instances of
    one tritonserver model count into one statistics entry and share their custom metrics'
    series."""
    kwargs: Dict[str, Any] = {"model_name": served.name, "instance_name": instance_name}
    if first is not None:  # auto_complete_config ran once, for the first, as in the server
        kwargs.update(config=first.config, auto_complete=False)
        if not served.in_process:
            kwargs["metric_store"] = first.metric_store
    kind = ModelHarness if served.in_process else StubModel
    model = kind(served.directory, **kwargs).start()
    if first is not None:
        model.statistics = first.statistics
    return model


def instance_names(config: Dict[str, Any]) -> List[str]:
    """The instances' names, as tritonserver names them: ``<group>_<k>`` for each group
    and each of its ``count`` instances."""
    return [
        f"{group['name']}_{k}"
        for group in config.get("instance_group", [])
        for k in range(int(group.get("count", 1) or 1))
    ]


def revive(served: Served, index: int) -> None:
    """An instance whose stub process died (model code crashed it, or it was killed) is
    replaced by a fresh one that runs ``initialize`` again, as the backend restarts a stub;
    called before each request with ``served.lock`` held."""
    model = served.instances[index]
    if getattr(model, "alive", True):
        return
    print(
        f"pybackend devserver: the stub process of model '{served.name}' "
        f"({model.instance_name}) exited; starting a new one",
        file=sys.stderr,
        flush=True,
    )
    model.close()
    try:
        # The same model version: its config, statistics and metrics registry go on.
        replacement = _start_instance(served, model.instance_name, model)
    except Exception as e:  # noqa: BLE001 - model code may raise anything
        raise ServeError(
            f"model '{served.name}' could not be restarted after its stub process exited: {e}",
            ErrorCode.UNAVAILABLE,
        ) from None
    served.instances[index] = replacement
    served.shown.pop(index, None)


def _stable_hash(value: Any) -> int:
    """The same number for a correlation id in every run (``hash`` of a str is not)."""
    return zlib.crc32(str(value).encode())


def metadata(served: Served) -> Dict[str, Any]:
    """``GET /v2/models/<name>``: tritonserver's model metadata."""
    config = served.config
    batch = [-1] if int(config.get("max_batch_size", 0) or 0) > 0 else []

    def tensors(section: str) -> List[Dict[str, Any]]:
        return [
            {
                "name": str(t["name"]),
                "datatype": wire_name(str(t.get("data_type", ""))),
                "shape": batch + [int(d) for d in t.get("dims", [])],
            }
            for t in config.get(section, [])
        ]

    return {
        "name": served.name,
        "versions": [str(served.version)],
        "platform": "python",
        "inputs": tensors("input"),
        "outputs": tensors("output"),
    }


def output_types(served: Served) -> Dict[str, str]:
    return declared_types(served.config, "output")
