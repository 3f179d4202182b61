"""The model object an attached instance runs: it turns pb_utils requests into PyTriton's
:class:`~pybackend.pytriton.proxy.types.Request` mappings, calls the bound inference
callable (plain function, coroutine, generator or async generator) and turns the dicts it
returns into responses, with PyTriton's output checks."""

from __future__ import annotations

import inspect
import json
import logging
import time
from typing import AbstractSet, Any, Callable, Dict, Generator, List, Optional

import numpy as np

from ..stub.tracebacks import format_exception
from ..utils.errors import TritonError
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.senders import TRITONSERVER_RESPONSE_COMPLETE_FINAL
from ..utils.tensor import Tensor as PbTensor
from ._context import TritonContext, TritonModelConfig, serving
from ._gpu import GpuInputs, dlpack_output, framework, is_device_array
from .exceptions import PyTritonUnrecoverableError
from .proxy.types import Request

LOGGER = logging.getLogger("pybackend.pytriton")

_ALLOWED_KINDS = "biufOSU"
_OBJECTS = (bytes, object, np.bytes_, np.object_, str, np.str_)


# Triton's request flags (TRITONSERVER_REQUEST_FLAG_SEQUENCE_START / _END).
_SEQUENCE_START = 1
_SEQUENCE_END = 2
# Asking whether a request was cancelled is a round trip to the backend. A stream checks at
# most once per this many seconds (and always after a slow yield), so a fast generator does not
# pay a round trip per response, and a cancelled one still stops within this time.
_CANCEL_CHECK_S = 0.005


def to_request(
    r: InferenceRequest, gpu: Optional[GpuInputs] = None, on_gpu: AbstractSet[str] = frozenset()
) -> Request:
    """``on_gpu``: the inputs declared with device="cuda", given as ``gpu`` converts them."""
    if gpu is None:
        data = {t.name(): t.as_numpy() for t in r.inputs()}
    else:
        data = {
            t.name(): gpu.convert(t) if t.name() in on_gpu else t.as_numpy() for t in r.inputs()
        }
    text = r.parameters()
    params = json.loads(text) if text else {}
    flags = r.flags()
    return Request(
        data=data,
        parameters=params,
        requested_output_names=sorted(r.requested_output_names()),
        sequence_id=r.correlation_id(),
        sequence_start=bool(flags & _SEQUENCE_START),
        sequence_end=bool(flags & _SEQUENCE_END),
        _cancelled=r.is_cancelled,
    )


class CallableModel:
    """One instance of a bound model; ``execute`` runs on that instance's thread."""

    #: The callable's ``sequence_idle``, when it has one (set per instance).
    sequence_idle: Optional[Callable[[Any], Any]] = None

    def __init__(
        self,
        config: TritonModelConfig,
        context: TritonContext,
        infer_func: Callable[..., Any],
        strict: bool,
        dispatcher: Any,  # runs coroutines: run_coroutine(coro) (the instance's Dispatcher)
        on_unrecoverable: Callable[[str], None],
        device_id: int = 0,
        warmup_executions: int = 0,
    ) -> None:
        self.model_name = config.model_name
        self._config = config
        self._context = context
        self._fn = infer_func
        self._outputs = {t.name: t for t in config.outputs or ()}
        self._batching = config.batching
        self._decoupled = config.decoupled
        self._strict = strict
        self._dispatcher = dispatcher
        self._on_unrecoverable = on_unrecoverable
        # Triton warms an instance up (model_warmup) before it schedules anything else on it:
        # its first executions are the warmup's.
        self._warmups_left = warmup_executions
        # TensorSpec (a configuration read from the server, CallableAdapter) has no device.
        self._on_gpu = frozenset(
            str(t.name) for t in config.inputs or () if getattr(t, "device", "cpu") == "cuda"
        )
        name = framework() if self._on_gpu else None
        self._gpu = GpuInputs(name, device_id) if name else None
        # A callable object's own ``sequence_idle(sequence_id)`` is the instance's: the stub
        # calls it for each sequence Triton ended for being idle (pybackend/stub/
        # sequence_idle.py), serialised with this instance's executions.
        hook = getattr(infer_func, "sequence_idle", None)
        if callable(hook):
            self.sequence_idle = hook

    # ------------------------------------------------------------------ execute

    def execute(self, requests: List[InferenceRequest]) -> Any:
        warming = self._warmups_left > 0
        if warming:
            self._warmups_left -= 1
        reqs = [to_request(r, self._gpu, self._on_gpu) for r in requests]
        if self._decoupled:
            self._stream(requests, reqs, warming)
            return None
        if not warming:
            return self._answer(requests, reqs)
        try:
            return self._answer(requests, reqs)
        except Exception as e:  # noqa: BLE001 - the callable may raise anything
            self._warmup_failed(e)
            return [InferenceResponse([]) for _ in requests]

    def _warmup_failed(self, e: BaseException) -> None:
        # As PyTriton: a failed warmup is logged and the model loads. Failing the sample
        # would fail the load, and tritonserver 2.51 then often dies (SIGSEGV) for any
        # backend, NVIDIA's included.
        LOGGER.warning(
            "Warmup of model `%s` failed; the model loads anyway.\n%s",
            self.model_name,
            format_exception(e),
        )

    def _answer(self, requests: List[InferenceRequest], reqs: List[Request]) -> Any:
        try:
            with serving(self._config, self._context):
                results = list(self._results(reqs))
        except PyTritonUnrecoverableError as e:
            self._on_unrecoverable(format_exception(e))
            raise
        if len(results) != 1:
            raise ValueError(
                f"The inference callable of model `{self.model_name}` produced {len(results)} "
                "results for one batch; only a decoupled model (ModelConfig(decoupled=True)) "
                "may yield several."
            )
        responses = results[0]
        self._validate(responses, len(requests))
        return [InferenceResponse(self._tensors(d)) for d in responses]

    def _stream(
        self, requests: List[InferenceRequest], reqs: List[Request], warming: bool = False
    ) -> None:
        senders = [r.get_response_sender() for r in requests]
        results = self._results(reqs)
        checked = time.monotonic()
        try:
            with serving(self._config, self._context):
                for responses in results:
                    self._validate(responses, len(requests))
                    now = time.monotonic()
                    check = now - checked >= _CANCEL_CHECK_S
                    if check:
                        checked = now
                    live = 0
                    for sender, d in zip(senders, responses):
                        # A cancelled request's client is gone: its responses go nowhere.
                        if not (check and sender.is_cancelled()):
                            sender.send(InferenceResponse(self._tensors(d)))
                            live += 1
                    if not live:
                        # Every client of the batch cancelled or went away: stop iterating,
                        # so the callable's generator is closed (GeneratorExit at its yield,
                        # its finally blocks run) and the instance takes the next request.
                        results.close()
                        break
        except Exception as e:  # noqa: BLE001 - the callable may raise anything
            if warming:
                self._warmup_failed(e)
                for sender in senders:
                    sender.send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return
            # The stub's form for every model error: "<type>: <message>", then the frames.
            text = format_exception(e)
            error = InferenceResponse(error=TritonError(text))
            for sender in senders:
                sender.send(error, flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            if isinstance(e, PyTritonUnrecoverableError):
                self._on_unrecoverable(text)
            return
        for sender in senders:
            sender.send(flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL)

    def _results(self, reqs: List[Request]) -> Generator[Any, None, None]:
        """What the callable gives for one batch, one item per yield. Coroutines and async
        generators run on the instance's event loop; the results are sent from here.
        Closing this generator closes the callable's (sync or async) generator."""
        # By what the call returns, not by how the callable looks: decorators hide that.
        result = self._fn(reqs)
        if inspect.isawaitable(result):
            yield self._dispatcher.run_coroutine(result)
        elif inspect.isasyncgen(result):
            try:
                while True:
                    try:
                        item = self._dispatcher.run_coroutine(result.__anext__())
                    except StopAsyncIteration:
                        return
                    yield item
            except GeneratorExit:
                self._dispatcher.run_coroutine(result.aclose())
                raise
        elif inspect.isgenerator(result):
            yield from result
        else:
            yield result

    # ------------------------------------------------------------------ outputs

    def _tensors(self, outputs: Dict[str, np.ndarray]) -> List[PbTensor]:
        tensors = []
        for name, value in outputs.items():
            if is_device_array(value):
                tensors.append(dlpack_output(name, value))  # torch/cupy: shared, as is
                continue
            spec = self._outputs.get(name)
            if value.dtype.kind == "U":
                value = np.char.encode(value, "utf-8")
            elif spec is not None and spec.dtype not in _OBJECTS and value.dtype != spec.dtype:
                # PyTriton casts every output to its configured type (float64 -> FP32 ...).
                value = value.astype(spec.dtype)
            tensors.append(PbTensor(name, value))
        return tensors

    def _validate(self, outputs: Any, n_requests: int) -> None:
        """PyTriton's checks and texts (proxy/validators.py)."""
        name = self.model_name
        if not isinstance(outputs, list):
            raise ValueError(
                f"Outputs returned by `{name}` model callable must be list of response dicts "
                f"with numpy arrays. Got outputs={outputs} instead."
            )
        if len(outputs) != n_requests:
            raise ValueError(
                f"Number of outputs returned by `{name}` inference callable ({len(outputs)}) "
                f"does not match number of requests ({n_requests}) received from Triton."
            )
        for response in outputs:
            if not isinstance(response, dict):
                raise ValueError(
                    f"Outputs returned by `{name}` model callable must be list of response "
                    f"dicts with numpy arrays. Got response={response} instead."
                )
            for key, value in response.items():
                if is_device_array(value):
                    if not isinstance(key, str):
                        raise ValueError(
                            f"Not all keys returned by `{name}` model callable are string"
                        )
                    continue  # torch/cupy: DLPack checks what it can share
                self._validate_data(key, value)
                if self._strict:
                    self._validate_strict(key, value)

    def _validate_data(self, key: Any, value: Any) -> None:
        name = self.model_name
        if not isinstance(key, str):
            raise ValueError(f"Not all keys returned by `{name}` model callable are string")
        if not isinstance(value, np.ndarray):
            raise ValueError(f"Not all values returned by `{name}` model callable are numpy arrays")
        if value.dtype.kind not in _ALLOWED_KINDS:
            raise ValueError(
                "Only bool, numeric, string, unicode and object arrays are supported by Triton "
                f"(dtype.kind: {_ALLOWED_KINDS}). Returned `{key}` for model `{name}` has "
                f"`{value.dtype.kind}` dtype.kind."
            )
        if value.dtype.kind == "O" and value.size:
            first = value.item(0)
            if isinstance(first, str):
                raise ValueError(
                    "Use string/byte-string instead of object for passing string in NumPy "
                    f"array from model `{name}`."
                )
            if not isinstance(first, bytes):
                raise ValueError(
                    f"Only bytes as objects dtype are supported by PyTriton. Returned `{key}` "
                    f"from `{name}` has `{type(first)}` type."
                )

    def _validate_strict(self, key: str, value: np.ndarray) -> None:
        name = self.model_name
        spec = self._outputs.get(key)
        if spec is None:
            raise ValueError(
                f"Returned output `{key}` is not defined in model config for model `{name}`."
            )
        if (value.dtype.kind not in "OSU" and not np.issubdtype(value.dtype, spec.dtype)) or (
            value.dtype.kind in "OSU" and spec.dtype not in _OBJECTS
        ):
            raise ValueError(
                f"Returned output `{key}` for model `{name}` has invalid type. "
                f"Returned: {value.dtype} ({value.dtype.kind}). Expected: {spec.dtype}."
            )
        dims = value.shape[1:] if self._batching else value.shape
        if len(dims) != len(spec.shape):
            raise ValueError(
                f"Returned output `{key}` for model `{name}` has invalid shapes. "
                f"Returned: {dims}. Expected: {spec.shape}."
            )
        if any(x != y != -1 for x, y in zip(dims, spec.shape)):
            raise ValueError(
                f"Returned output `{key}` for model `{name}` has invalid shapes at one or more "
                f"positions. Returned: {dims}. Expected: {spec.shape}."
            )
