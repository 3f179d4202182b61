"""Run a ``model.py`` in this process, with the real pb_utils types and no server.

    with ModelHarness("model_repository/add_sub") as model:
        out = model.infer({"INPUT0": a, "INPUT1": b})     # {"OUTPUT0": ..., "OUTPUT1": ...}

The model is imported the way the stub imports it (its version directory and model
directory on ``sys.path``, relative imports of its siblings), ``auto_complete_config`` and
``initialize(args)`` get what Triton would give them, ``execute`` gets real
``InferenceRequest`` objects, and a failing ``execute`` turns into the error responses a
client would see, with the backend's texts. Decoupled models answer through their response
senders (also from threads, after ``execute`` returned): ``stream`` collects them. BLS calls
go to other harnesses started in the same process (by model name) or to fakes.

This module loads and closes the model and holds the calls that get one response each
(``infer``, ``infer_batch``); the requests and ``execute`` are :class:`HarnessExecute`'s
(harness_execute.py), response senders and ``infer_stream`` :class:`HarnessStreams`'
(harness_streams.py), BLS calls to the model :class:`HarnessBls`' (harness_bls.py).
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys
import types
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

from ..stub import loader
from ..stub.parameters import ParameterError
from ..stub.returns import OutputRules
from ..utils.errors import TritonModelException
from ..utils.request import InferenceRequest
from .config import complete
from .harness_bls import HarnessBls
from .harness_errors import InferError
from .harness_execute import Inputs
from .harness_responses import response_outputs
from .load_checks import refuse_like_server, run_warmup
from .results import Outputs
from .transport import BlsFake, LogRecord, install, uninstall_if_idle


class ModelHarness(HarnessBls):
    """One instance of the model in ``model_dir`` (``<model_dir>/<version>/model.py`` and
    ``<model_dir>/config.pbtxt``). ``config``: a dict instead of config.pbtxt (or on top of
    an absent one). ``bls``: fakes for models this one calls, by name."""

    def __init__(
        self,
        model_dir: Union[str, Path],
        *,
        version: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None,
        model_name: Optional[str] = None,
        instance_name: Optional[str] = None,
        bls: Optional[Mapping[str, BlsFake]] = None,
        model_file: str = "model.py",
        auto_complete: bool = True,
    ) -> None:
        super().__init__(
            model_dir,
            version=version,
            config=config,
            model_name=model_name,
            instance_name=instance_name,
            model_file=model_file,
            auto_complete=auto_complete,
        )
        self.logs: List[LogRecord] = []
        self.model: Any = None
        self.finalizing = False  # close() runs finalize: BLS is refused (spec 2.3)
        self._fakes = dict(bls or {})

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> "ModelHarness":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> "ModelHarness":
        """Import model.py, run ``auto_complete_config`` (when defined) and ``initialize``."""
        t = self._transport
        with t.lock:
            t.harnesses.append(self)
            t.fakes.update(self._fakes)
        install(t)
        try:
            refuse_like_server(self.config, self.model_name)
            self._load()
        except BaseException:
            self.model = None  # initialize failed: no finalize, as in the server
            self.close()  # the process is as before: no harness left registered
            raise
        try:
            run_warmup(self)  # model_warmup, as the server runs it before the model is ready
        except BaseException:
            self.close()
            raise
        return self

    def _load(self) -> None:
        with self._running():
            module = self._import()
            try:  # the stub's loader, so its checks and texts are the ones a model meets
                cls = loader.model_class(module)
                if self.auto_complete and hasattr(cls, "auto_complete_config"):
                    init = {"model_config": json.dumps(self.config), "model_name": self.model_name}
                    completed = json.loads(loader.auto_complete(module, init))
                    self.config = complete(completed, self.model_name)
                else:  # the server completes every config (a batcher's preferred sizes)
                    self.config = complete(self.config, self.model_name)
                # The stub's rules for what execute returns (stub/returns.py).
                self._output_rules = OutputRules(self.config, self.instance_name)
            except (loader.LoadError, ParameterError) as e:
                raise TritonModelException(str(e)) from None
            self.model = cls()
            if hasattr(self.model, "initialize"):
                result = self.model.initialize(self.initialize_args())
                if inspect.iscoroutine(result):
                    self._run(result)

    def _import(self) -> types.ModuleType:
        if not self.model_file.is_file():
            raise TritonModelException(loader.missing_file_text(self.model_file))
        for path in (str(self.version_dir), str(self.model_dir)):
            if path not in sys.path:
                sys.path.append(path)
        # A package of our own per model and version, so two models' "1/model.py" do not
        # share a module, and relative imports of the model's siblings work as in the stub.
        package = _package_of(self.version_dir)
        if package not in sys.modules:
            pkg = types.ModuleType(package)
            pkg.__path__ = [str(self.version_dir)]  # type: ignore[attr-defined]
            sys.modules[package] = pkg
        return importlib.import_module(f"{package}.{self.model_file.stem}")

    def close(self) -> None:
        """``finalize``, then forget the model."""
        self.finalizing = True  # BLS is refused from here on, as in the stub
        if self.model is not None and hasattr(self.model, "finalize"):
            with self._running():
                result = self.model.finalize()
                if inspect.iscoroutine(result):
                    self._run(result)
        self.model = None
        if self._loop is not None:
            loop, thread = self._loop, self._loop_thread
            loop.call_soon_threadsafe(loop.stop)
            if thread is not None:
                thread.join(5)
            if not loop.is_running():
                loop.close()
            self._loop = self._loop_thread = None
        t = self._transport
        with t.lock:
            if self in t.harnesses:
                t.harnesses.remove(self)
            for name in self._fakes:
                t.fakes.pop(name, None)
            for token in [k for k, h in t.by_token.items() if h is self]:
                del t.by_token[token]
        t.forget_families_of(self)
        uninstall_if_idle(t)

    def initialize_args(self) -> Dict[str, str]:
        """The ``args`` of ``initialize`` (spec: 7 string keys)."""
        kind = "CPU"
        groups = self.config.get("instance_group") or []
        if groups and str(groups[0].get("kind", "")).endswith("GPU"):
            kind = "GPU"
        return {
            "model_config": json.dumps(self.config),
            "model_instance_kind": kind,
            "model_instance_name": self.instance_name,
            "model_instance_device_id": "0",
            "model_repository": str(self.model_dir),
            "model_version": str(self.version),
            "model_name": self.model_name,
        }

    # ------------------------------------------------------------------ calls

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
    ) -> List[Union[Outputs, InferError]]:
        """Several requests in one ``execute``, as the dynamic batcher hands them over.
        ``options``: per request, ``requested_outputs``, ``request_id``, ``parameters`` and
        ``queued_ns`` as :meth:`request` takes them. Per request: its outputs, or its error as an
        :class:`InferError` (returned, not raised: one request's error leaves the others'
        answers). A request the server would refuse gets that error and stays out of the
        batch, as in the server."""
        if self.decoupled:
            raise TypeError("infer_batch is for models that answer with one response")
        results: List[Any] = [None] * len(batch)
        admitted: List[Tuple[int, InferenceRequest]] = []
        for i, inputs in enumerate(batch):
            opts = {"requested_outputs": requested_outputs, **(options[i] if options else {})}
            try:
                admitted.append((i, self.request(inputs, **opts)))
            except InferError as e:
                results[i] = e
        if admitted:
            responses = self.execute([req for _, req in admitted])
            for (i, req), resp in zip(admitted, responses):
                try:
                    results[i] = response_outputs(
                        None if resp is None else self._checked(resp, req), req
                    )
                except InferError as e:
                    results[i] = e
        return results

    def infer(self, inputs: Inputs, **kwargs: Any) -> Outputs:
        """One request; its outputs by name (only ``requested_outputs`` when given). An
        error response raises :class:`InferError` with its message."""
        req = self.request(inputs, **kwargs)
        if self.decoupled:
            responses = self.stream(req)
            if len(responses) != 1:
                raise InferError(f"the decoupled model sent {len(responses)} responses, not 1")
            return response_outputs(self._checked(responses[0], req), req)
        (resp,) = self.execute([req])
        return response_outputs(None if resp is None else self._checked(resp, req), req)


def _package_of(version_dir: Path) -> str:
    return f"_pybackend_harness_{abs(hash(str(version_dir)))}"


def forget_imports(version_dir: Union[str, Path]) -> None:
    """Drop what the harness imported from ``version_dir`` (its model.py and siblings), so
    that the next harness of that model imports the files as they are now (a reload)."""
    package = _package_of(Path(version_dir).resolve())
    for name in [n for n in sys.modules if n == package or n.startswith(package + ".")]:
        del sys.modules[name]
