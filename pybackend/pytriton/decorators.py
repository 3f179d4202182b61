"""PyTriton's decorators for inference callables (``pytriton.decorators``), with its
semantics and error texts. Stacking and cutting rows is pybackend/utils/stacking.py, the
core ``pb_utils.batch_requests`` uses too.

A decorator here wraps functions and methods alike: applied to a method, the wrapper binds
like the method and calls it without ``self`` in ``args`` (``instance`` is the object)."""

from __future__ import annotations

import bisect
import functools
import inspect
import itertools
import operator
from typing import Any, Callable, Dict, List, Optional, Tuple, Union

import numpy as np

from ..utils.stacking import split, stack
from ._context import (
    ModelConfigDict,
    TritonContext,
    TritonModelConfig,
    get_model_config,
    get_triton_context,
)
from ._padding import ConstantPadder
from .exceptions import PyTritonBadParameterError, PyTritonRuntimeError, PyTritonValidationError

__all__ = [
    "ConstantPadder",
    "InferenceRequest",
    "InferenceRequests",
    "InferenceResult",
    "InferenceResults",
    "InputNames",
    "ModelConfigDict",
    "TritonContext",
    "batch",
    "convert_output",
    "fill_optionals",
    "first_value",
    "get_inference_request_batch_size",
    "get_model_config",
    "get_triton_context",
    "group_by_keys",
    "group_by_values",
    "pad_batch",
    "sample",
    "triton_context",
]

# PyTriton's type aliases for a callable's arguments and results.
InputNames = List[str]
InferenceRequest = Dict[str, np.ndarray]
InferenceRequests = Union[List[InferenceRequest], Tuple[InferenceRequest, ...]]
InferenceResult = Dict[str, np.ndarray]
InferenceResults = Union[List[InferenceResult], Tuple[InferenceResult, ...]]

TRITON_CONTEXT_FIELD_NAME = "triton_context"
_SPECIAL_KEYS = ["__triton_context__"]
Impl = Callable[[Callable[..., Any], Any, Tuple[Any, ...], Dict[str, Any]], Any]


class _Wrapper:
    """``impl(wrapped, instance, args, kwargs)`` around ``wrapped``; binds like a method."""

    def __init__(self, wrapped: Callable[..., Any], impl: Impl, instance: Any = None) -> None:
        functools.update_wrapper(self, wrapped)
        self._impl = impl
        self._instance = instance

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return self
        return _Wrapper(self.__wrapped__.__get__(obj, objtype), self._impl, obj)  # type: ignore[attr-defined]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._impl(self.__wrapped__, self._instance, args, kwargs)  # type: ignore[attr-defined]

    def _decorators(self) -> List[Impl]:
        """The impls of this wrapper and of the wrappers inside it."""
        out: List[Impl] = []
        inner: Any = self
        while isinstance(inner, _Wrapper):
            out.append(inner._impl)
            inner = inner.__wrapped__  # type: ignore[attr-defined]
            if inspect.ismethod(inner) and isinstance(inner.__func__, _Wrapper):
                inner = inner.__func__
        return out


def _decorator(impl: Impl) -> Callable[[Callable[..., Any]], _Wrapper]:
    @functools.wraps(impl)
    def decorate(wrapped: Callable[..., Any]) -> _Wrapper:
        return _Wrapper(wrapped, impl)

    decorate._impl = impl  # type: ignore[attr-defined]
    return decorate


def get_inference_request_batch_size(inference_request: Any) -> int:
    """Rows of the request's first input."""
    first_input_value = next(iter(inference_request.values()))
    batch_size, *_dims = first_input_value.shape
    return batch_size


def convert_output(
    outputs: Union[Dict[str, Any], List[Any], Tuple[Any, ...]],
    wrapped: Any = None,
    instance: Any = None,
    model_config: Optional[TritonModelConfig] = None,
) -> Dict[str, Any]:
    """A list or tuple of outputs becomes a dict in the order of the model's outputs."""
    if isinstance(outputs, dict):
        return outputs
    if isinstance(outputs, (list, tuple)):
        if model_config is None:
            model_config = get_model_config(wrapped, instance)
        specs = model_config.outputs or ()
        if len(outputs) != len(specs):
            raise PyTritonValidationError("Outputs length different than config outputs length")
        return {spec.name: out for spec, out in zip(specs, outputs)}
    raise PyTritonValidationError(f"Unsupported output type {type(outputs)}.")


def _sample(
    wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    kwargs.update(args[0][0])
    outputs = wrapped(*args[1:], **kwargs)
    return [convert_output(outputs, wrapped, instance)]


sample = _decorator(_sample)
sample.__doc__ = "The first request's inputs as keyword arguments (non-batching models)."


def _batch(
    wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    req_list = args[0]
    input_names = req_list[0].keys()
    for request in req_list[1:]:
        if input_names != request.keys():
            raise PyTritonValidationError("Cannot batch requests with different set of inputs keys")
    new_kwargs = dict(kwargs)
    new_kwargs.update(stack(req_list, input_names))
    outputs = wrapped(*args[1:], **new_kwargs)
    sizes = [get_inference_request_batch_size(r) for r in req_list]
    total = sum(sizes)

    def split_result(result: Any) -> List[Dict[str, Any]]:
        out = convert_output(result, wrapped, instance)
        wrong = {n: v.shape for n, v in out.items() if v.shape[0] != total}
        if wrong:
            # PyTriton's type and text (the shapes, not only their first dimension).
            listed = ", ".join(": ".join(map(str, item)) for item in wrong.items())
            raise ValueError(
                f"Received output tensors with different batch sizes: {listed}. "
                f"Expected batch size: {total}. "
            )
        return split(out, sizes)

    if inspect.isgenerator(outputs):
        return (split_result(o) for o in outputs)
    return split_result(outputs)


batch = _decorator(_batch)
batch.__doc__ = (
    "The requests' inputs stacked along dim 0 as keyword arguments; the outputs (a dict, or "
    "a list in the order of the model's outputs) cut back into one dict per request."
)


def _group_by_keys(
    wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    inputs = args[0]
    indexed = sorted(
        ((i, tuple(sorted(r.keys())), r) for i, r in enumerate(inputs)), key=operator.itemgetter(1)
    )
    results: List[Tuple[int, Any]] = []
    for _, group in itertools.groupby(indexed, key=operator.itemgetter(1)):
        idx, _keys, requests = zip(*group)
        out = wrapped(list(requests), *args[1:], **kwargs)
        results.extend(zip(idx, out))
    results.sort(key=operator.itemgetter(0))
    return [r for _, r in results]


group_by_keys = _decorator(_group_by_keys)
group_by_keys.__doc__ = "Calls the callable once per group of requests with the same inputs."


def _value_key(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        if value.dtype == np.object_ or value.dtype.type == np.bytes_:
            return tuple(bytes(v) for v in value.reshape(-1)) + (value.shape,)
        return value.tobytes()
    return value


def group_by_values(
    *keys: str, pad_fn: Optional[Callable[[Any], Any]] = None
) -> Callable[[Callable[..., Any]], _Wrapper]:
    """Calls the callable (after @batch) once per group of rows with equal values of ``keys``
    and puts the rows of the results back in place; ``pad_fn`` (e.g. ConstantPadder) makes
    the groups' outputs stackable."""

    def impl(
        wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        if isinstance(wrapped, _Wrapper) and _batch in wrapped._decorators():
            raise PyTritonRuntimeError(
                "The @group_by_values decorator must be used after the @batch decorator."
            )
        request = {k: v for k, v in kwargs.items() if k not in _SPECIAL_KEYS}
        other = {k: v for k, v in kwargs.items() if k in _SPECIAL_KEYS}
        batch_size = get_inference_request_batch_size(request)
        keyed = sorted(
            ((i, tuple(_value_key(request[k][i]) for k in keys)) for i in range(batch_size)),
            key=operator.itemgetter(1),
        )
        parts = []
        for _, group in itertools.groupby(keyed, key=operator.itemgetter(1)):
            rows, _ = zip(*group)
            sub = {name: value[list(rows), ...] for name, value in request.items()}
            parts.append((rows, wrapped(*args, **sub, **other)))
        if pad_fn is not None:
            padded = pad_fn([r for _, r in parts])
            parts = [(rows, r) for (rows, _), r in zip(parts, padded)]
        first = parts[0][1]
        result = {
            name: np.zeros((batch_size,) + data.shape[1:], dtype=data.dtype)
            for name, data in first.items()
        }
        for rows, res in parts:
            for name, data in res.items():
                result[name][list(rows), ...] = data
        return result

    return _decorator(impl)


def fill_optionals(**defaults: np.ndarray) -> Callable[[Callable[..., Any]], _Wrapper]:
    """Requests that lack an optional input get ``defaults[name]`` (tiled over the batch
    when the model batches)."""

    def verify(config: TritonModelConfig) -> None:
        inputs = {spec.name: spec for spec in config.inputs or ()}
        missing = sorted(set(defaults) - set(inputs))
        if missing:
            raise PyTritonBadParameterError(f"Could not found {', '.join(missing)} inputs")
        not_numpy = {k: v for k, v in defaults.items() if not isinstance(v, np.ndarray)}
        if not_numpy:
            listed = ", ".join(f"{k}={v}" for k, v in not_numpy.items())
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they are not NumPy arrays"
            )
        wrong_dtype = {
            k: (v.dtype, inputs[k].dtype) for k, v in defaults.items() if v.dtype != inputs[k].dtype
        }
        if wrong_dtype:
            listed = ", ".join(
                f"{n}: dtype={h} expected_dtype={e}" for n, (h, e) in wrong_dtype.items()
            )
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they have different than input "
                "signature dtypes"
            )

        def matches(have: Tuple[int, ...], want: Tuple[int, ...]) -> bool:
            return len(have) == len(want) and all(e == -1 or h == e for h, e in zip(have, want))

        wrong_shape = {
            k: (v.shape, inputs[k].shape)
            for k, v in defaults.items()
            if not matches(v.shape, inputs[k].shape)
        }
        if wrong_shape:
            listed = ", ".join(
                f"{n}: shape={h} expected_shape={e}" for n, (h, e) in wrong_shape.items()
            )
            raise PyTritonBadParameterError(
                f"Could not use {listed} defaults as they have different than input "
                "signature shapes"
            )

    def impl(
        wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        config = get_model_config(wrapped, instance)
        verify(config)
        (requests,) = args
        for request in requests:
            rows = get_inference_request_batch_size(request) if config.batching else 0
            for name, value in defaults.items():
                if name in request:
                    continue
                if config.batching:
                    value = np.tile(value, (rows,) + (1,) * value.ndim)
                request[name] = value
        return wrapped(*args, **kwargs)

    return _decorator(impl)


def _triton_context(
    wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    kwargs[TRITON_CONTEXT_FIELD_NAME] = get_triton_context(wrapped, instance)
    return wrapped(*args, **kwargs)


triton_context = _decorator(_triton_context)
triton_context.__doc__ = "Passes the TritonContext as the keyword argument ``triton_context``."


def _pad_batch(
    wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
) -> Any:
    inputs = {k: v for k, v in kwargs.items() if k != "__triton_context__"}
    first_input = next(iter(inputs.values()))
    config = get_model_config(wrapped, instance)
    sizes: List[int] = (
        []
        if config.batcher is None or config.batcher.preferred_batch_size is None
        else sorted(config.batcher.preferred_batch_size)
    )
    sizes.append(config.max_batch_size)
    size = sizes[bisect.bisect_left(sizes, first_input.shape[0])]
    for name, array in inputs.items():
        # The last row repeated up to the next preferred batch size (or max_batch_size).
        repeats = np.ones(array.shape[0], dtype=np.int64)
        repeats[-1] = size - array.shape[0] + 1
        kwargs[name] = np.repeat(array, repeats, axis=0)
    return wrapped(*args, **kwargs)


pad_batch = _decorator(_pad_batch)
pad_batch.__doc__ = "Pads the stacked batch (after @batch) to a preferred batch size."


def first_value(
    *keys: str, squeeze_single_values: bool = True, strict: bool = True
) -> Callable[[Callable[..., Any]], _Wrapper]:
    """The named inputs become their first row (a scalar when it has one element); with
    ``strict`` every row must be equal."""
    if any(k in _SPECIAL_KEYS for k in keys):
        not_allowed = [k for k in keys if k in _SPECIAL_KEYS]
        raise PyTritonBadParameterError(
            f"The keys {', '.join(not_allowed)} are not allowed as keys for @first_value wrapper. "
            f"The set of not allowed keys are {', '.join(_SPECIAL_KEYS)}"
        )

    def replace(request: Any) -> Any:
        for name in keys:
            if name not in request:
                continue
            values = request[name]
            if strict:
                axis = None if values.dtype == object else 0
                if len(np.unique(values, axis=axis)) > 1:
                    raise PyTritonRuntimeError(
                        f"The values on the {name!r} input are not equal. "
                        "To proceed, either disable strict mode in @first_value wrapper "
                        "or ensure that the values always are consistent. "
                        f"The current values of {name!r} are {request[name]!r}."
                    )
            value = values[0]
            if (
                squeeze_single_values
                and not np.isscalar(value)
                and all(d == 1 for d in value.shape)
            ):
                value = np.squeeze(value)[()]
            request[name] = value
        return request

    def impl(
        wrapped: Callable[..., Any], instance: Any, args: Tuple[Any, ...], kwargs: Dict[str, Any]
    ) -> Any:
        if not get_model_config(wrapped, instance).batching:
            raise PyTritonRuntimeError(
                "The @first_value decorator can only be used with models that support batching."
            )
        if set(kwargs) - set(_SPECIAL_KEYS):
            return wrapped(*args, **replace(kwargs))
        requests, *rest = args
        return wrapped([replace(r) for r in requests], *rest, **kwargs)

    return _decorator(impl)
