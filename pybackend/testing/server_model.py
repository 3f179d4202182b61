"""The harness's calls (``infer``, ``infer_stream``) answered by a real tritonserver running
the model with pybackend's backend (or the original): the same test, end to end.

Needs the ``server`` extra (the nvidia-pytriton wheel's tritonserver and tritonclient).
"""

from __future__ import annotations

import queue
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Union

import numpy as np

from ..stub.returns import OutputMismatch, OutputRules
from ..utils.config_rules import other_backend, runtime_backend
from .config import load_config
from .harness_bounds import CALL_TIMEOUT_S
from .harness_errors import InferError, from_client, no_final, no_response
from .model_dir import runtime_of
from .outputs import array_mismatches, report_mismatches
from .results import Outputs, parameters_from_grpc

Inputs = Mapping[str, Any]


class ServerModel:
    """``model_dir`` (and ``others``, e.g. the models it calls through BLS) served by a
    tritonserver of its own on free loopback ports; ``backend`` is "ours" or "original";
    ``runtime``: the directory of the python-based backend whose ``model.py`` runs the model
    (served as the backend its config names; docs/python_based_backends.md); ``server_args``:
    more tritonserver options (``--http-header-forward-pattern=...``, ``--trace-config=...``),
    for what only a server does; ``infer(..., headers={...})`` sends HTTP headers."""

    def __init__(
        self,
        model_dir: Union[str, Path],
        *,
        others: Sequence[Union[str, Path]] = (),
        backend: str = "ours",
        runtime: Union[str, Path, None] = None,
        server_args: Sequence[str] = (),
    ) -> None:
        self.model_dir = Path(model_dir).resolve()
        self.server_args = list(server_args)
        self.model_name = self.model_dir.name
        self._runtimes: Dict[str, Path] = {}
        config: Dict[str, Any] = {}
        try:
            config = load_config(self.model_dir)
        except Exception:  # noqa: BLE001 - a config the server refuses: it says so at start
            if runtime is not None:
                raise
        # Checked as the offline engines check it: a python-based backend's model without
        # runtime= would fail its load with this text in a server on the backends directory
        # made here (a backends directory of the caller's own may hold the runtime).
        own_backends = backend in ("ours", "original")
        if runtime is not None or (own_backends and runtime_backend(config)):
            path = runtime_of(config, config.get("name") or self.model_name, runtime)
            if path is not None:  # always: runtime_of refuses a runtime it cannot serve
                self._runtimes[other_backend(config)] = path
        self.others = [Path(o).resolve() for o in others]
        self.backend = backend
        self._tmp: Optional[tempfile.TemporaryDirectory] = None
        self._server: Any = None
        #: Outputs that differed from config.pbtxt in responses the server passed on (each
        #: also an OutputMismatchWarning), as the offline engines report them.
        self.output_mismatches: List[OutputMismatch] = []
        self._output_rules: Optional[OutputRules] = None

    def __enter__(self) -> "ServerModel":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> "ServerModel":
        from ..server import TritonServer

        dirs = [self.model_dir, *self.others]
        names = [d.name for d in dirs]
        if len({d.parent for d in dirs}) == 1:
            # Served from where they are: paths in tracebacks and args["model_repository"]
            # are the real ones (explicit mode loads only these models).
            repo = self.model_dir.parent
        else:
            self._tmp = tempfile.TemporaryDirectory(prefix="pybackend-model-")
            repo = Path(self._tmp.name)
            for d in dirs:
                (repo / d.name).symlink_to(d, target_is_directory=True)
        self._server = TritonServer(
            repo,
            backend=self.backend,
            model_control_mode="explicit",
            load_models=names,
            runtimes=self._runtimes,
            extra_args=self.server_args,
        )
        try:
            self._server.__enter__()
        except BaseException:
            if self._tmp is not None:
                self._tmp.cleanup()
                self._tmp = None
            raise
        config = self.config
        groups = config.get("instance_group") or [{"name": self.model_name}]
        self._output_rules = OutputRules(config, f"{groups[0].get('name', self.model_name)}_0")
        return self

    def _reported(self, outputs: Outputs) -> Outputs:
        """``outputs`` (what the client got), its mismatches with the config reported."""
        rules = self._output_rules
        if rules is not None and not rules.strict:
            report_mismatches(array_mismatches(rules, outputs), self.output_mismatches)
        return outputs

    def close(self) -> None:
        if self._server is not None:
            self._server.__exit__(None, None, None)
            self._server = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    @property
    def server(self) -> Any:
        return self._server

    @property
    def config(self) -> Dict[str, Any]:
        """The model's configuration as the server holds it (after auto-complete)."""
        import tritonclient.http as httpclient

        client = httpclient.InferenceServerClient(self._server.http_url)
        try:
            return dict(client.get_model_config(self.model_name))
        finally:
            client.close()

    def infer(
        self,
        inputs: Inputs,
        *,
        requested_outputs: Sequence[str] = (),
        timeout: float = CALL_TIMEOUT_S,
        **kwargs: Any,
    ) -> Outputs:
        """One request over HTTP; ``timeout``: seconds the client waits for the answer (as
        the offline engines' ``timeout``, not tritonclient's server-side ``timeout`` in
        microseconds): past it, NoResponse."""
        import tritonclient.http as httpclient
        from tritonclient.utils import InferenceServerException

        client = httpclient.InferenceServerClient(self._server.http_url, network_timeout=timeout)
        try:
            ins = [_input(httpclient, k, v) for k, v in inputs.items()]
            outs = [httpclient.InferRequestedOutput(n) for n in requested_outputs] or None
            try:
                result = client.infer(self.model_name, ins, outputs=outs, **kwargs)
            except InferenceServerException as e:
                raise from_client(e) from None
            except TimeoutError:
                what = "the client stopped waiting, and the server's execute runs on"
                raise no_response(self.model_name, "", "infer", timeout, what) from None
            response = result.get_response()
            names = [o["name"] for o in response.get("outputs", [])]
            outputs = Outputs(((n, result.as_numpy(n)) for n in names), response.get("parameters"))
            return self._reported(outputs)
        finally:
            client.close()

    def infer_batch(
        self,
        batch: Sequence[Inputs],
        *,
        requested_outputs: Sequence[str] = (),
        options: Optional[Sequence[Mapping[str, Any]]] = None,
        timeout: float = CALL_TIMEOUT_S,
    ) -> List[Union[Outputs, InferError]]:
        """The requests sent at once; the server's dynamic batcher decides whether they
        meet in one ``execute`` (in-process and in a stub process they always do). Per
        request: its outputs, or its error as an :class:`InferError`."""
        results: List[Any] = [None] * len(batch)
        failures: List[BaseException] = []

        def one(i: int) -> None:
            opts = {"requested_outputs": requested_outputs, **(options[i] if options else {})}
            # The server's queue starts when the request arrives: no client sets it.
            opts.pop("queued_ns", None)
            try:
                results[i] = self.infer(batch[i], timeout=timeout, **opts)
            except InferError as e:
                results[i] = e
            except BaseException as e:  # noqa: BLE001 - raised in the caller's thread below
                failures.append(e)

        threads = [threading.Thread(target=one, args=(i,)) for i in range(len(batch))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if failures:  # e.g. a wrong option: as the offline engines raise it
            raise failures[0]
        return results

    def infer_stream(
        self,
        inputs: Inputs,
        timeout: float = CALL_TIMEOUT_S,
        cancel_after: Optional[int] = None,
        on_response: Optional[Callable[[Outputs], None]] = None,
        cancel_event: Optional[threading.Event] = None,
        **kwargs: Any,
    ) -> List[Outputs]:
        """A decoupled model's responses to one request, over a gRPC stream.
        ``cancel_after=n``: the client cancels the stream once ``n`` responses came (``0``:
        right after sending) and returns those; the server tells the model, whose
        ``is_cancelled()`` turns true. ``on_response``: called with each response's outputs
        as it arrives. ``cancel_event``: once set, the stream is cancelled as by
        ``cancel_after`` and what came so far is returned. ``kwargs`` go to tritonclient's
        ``async_stream_infer`` (``request_id``, ``sequence_id``, ``sequence_start``, ...)."""
        import tritonclient.grpc as grpcclient

        got: "queue.Queue[Any]" = queue.Queue()
        client = grpcclient.InferenceServerClient(self._server.grpc_url)
        # Cancelled unless its FINAL came: a stream left open (a timeout, an error, a
        # callback that raised) would keep stop_stream waiting for the server forever.
        cancel = True
        try:
            client.start_stream(callback=lambda result, error: got.put((result, error)))
            ins = [_input(grpcclient, k, v) for k, v in inputs.items()]
            # The offline engines' argument, as tritonclient takes it.
            names = kwargs.pop("requested_outputs", ())
            outs = [grpcclient.InferRequestedOutput(n) for n in names] or None
            client.async_stream_infer(
                self.model_name, ins, outputs=outs, enable_empty_final_response=True, **kwargs
            )
            responses: List[Outputs] = []
            deadline = time.monotonic() + timeout
            while True:
                if (cancel_after is not None and len(responses) >= cancel_after) or (
                    cancel_event is not None and cancel_event.is_set()
                ):
                    return responses
                wait = max(0.0, deadline - time.monotonic())
                if cancel_event is not None:
                    wait = min(wait, 0.02)  # short waits: the event may be set meanwhile
                try:
                    result, error = got.get(timeout=wait)
                except queue.Empty:
                    if time.monotonic() < deadline:
                        continue
                    raise no_final(self.model_name, timeout, len(responses)) from None
                if error is not None:
                    raise from_client(error)
                response = result.get_response()
                flag = response.parameters.get("triton_final_response")
                final = flag is not None and flag.bool_param
                # A response the model sent without outputs comes as one (the offline engines
                # keep it too); only a FINAL one cannot be told from the flag sent alone.
                if response.outputs or not final:
                    responses.append(
                        self._reported(
                            Outputs(
                                ((o.name, result.as_numpy(o.name)) for o in response.outputs),
                                parameters_from_grpc(response.parameters),
                            )
                        )
                    )
                    if on_response is not None:
                        on_response(responses[-1])
                if final:
                    cancel = False
                    return responses
        finally:
            client.stop_stream(cancel_requests=cancel)
            client.close()


def _input(module: Any, name: str, value: Any) -> Any:
    from tritonclient.utils import np_to_triton_dtype

    array = np.asarray(value)
    dtype = "BYTES" if array.dtype == np.object_ or array.dtype.kind in "SU" else None
    if array.dtype.kind == "U":
        array = np.char.encode(array, "utf-8").astype(np.object_)
    inp = module.InferInput(name, list(array.shape), dtype or np_to_triton_dtype(array.dtype))
    inp.set_data_from_numpy(array)
    return inp
