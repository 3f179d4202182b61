"""``pb_utils.batch_requests``: gather, execute, scatter (UV-16/17).

With dynamic batching, ``execute`` receives a list of requests, each with its own batch
dimension; models want one stacked array per input. ``batch_requests`` concatenates the
requests' inputs along dim 0 and returns a :class:`RequestBatch` that splits the model's
outputs back into one response per request (``split``, default mode) or sends each request
its rows through its own response sender (``send``, decoupled mode)::

    def execute(self, requests):
        inputs, batch = pb_utils.batch_requests(requests)
        out = self.model(inputs["INPUT0"])  # rows of every request, in order
        return batch.split({"OUTPUT0": out})

A request that cannot be stacked with the others (another dtype, other trailing dims
without ``pad``, an input more or less, inputs whose row counts differ) is left out of the
arrays and answered with an INVALID_ARG error naming it, so one bad client does not fail the
rest of the batch. Opt-in: nothing else in pb_utils changes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from .errors import TritonError, TritonModelException
from .response import InferenceResponse
from .senders import TRITONSERVER_RESPONSE_COMPLETE_FINAL
from .stacking import offsets, pad_to_common, stack
from .tensor import Tensor

__all__ = ["RequestBatch", "batch_requests"]

Outputs = Union[Mapping[str, Any], Sequence[Tensor]]
# (name, dtype, trailing dims or, when padded, their count)
_Signature = Tuple[Tuple[str, str, Tuple[int, ...]], ...]


class RequestBatch:
    """How the stacked rows map back to the requests (made by :func:`batch_requests`)."""

    def __init__(
        self,
        requests: Sequence[Any],
        sizes: List[int],
        errors: Dict[int, TritonError],
        shapes: List[Optional[Dict[str, Tuple[int, ...]]]],
    ) -> None:
        self.requests = list(requests)
        #: rows each request contributed (0 for a request left out)
        self.sizes = sizes
        #: requests left out, by index, with the error they are answered with
        self.errors = errors
        #: each request's own input shapes before padding (None for a request left out)
        self.shapes = shapes
        self._offsets = offsets(sizes)
        self._errors_sent = False

    def __len__(self) -> int:
        """Rows in the stacked arrays."""
        return self._offsets[-1]

    def rows(self, index: int) -> slice:
        """The rows of request `index` in the stacked arrays."""
        return slice(self._offsets[index], self._offsets[index + 1])

    def split(self, outputs: Outputs) -> List[InferenceResponse]:
        """One response per request, in order: its rows of every output (views, no copy),
        or the error of a request that was left out. Return it from ``execute``."""
        arrays = self._check_outputs(outputs)
        responses = []
        for i in range(len(self.requests)):
            if i in self.errors:
                responses.append(InferenceResponse(error=self.errors[i]))
            else:
                responses.append(self._response(arrays, i))
        return responses

    def send(self, outputs: Optional[Outputs] = None, flags: int = 0) -> None:
        """Decoupled mode: send each request its rows of `outputs` through its response
        sender with `flags` (``TRITONSERVER_RESPONSE_COMPLETE_FINAL`` for the last;
        ``outputs=None`` sends the flags alone). The requests left out get their error,
        with the final flag, on the first call."""
        arrays = self._check_outputs(outputs) if outputs is not None else None
        if not self._errors_sent:
            self._errors_sent = True
            for i, error in self.errors.items():
                self.requests[i].get_response_sender().send(
                    InferenceResponse(error=error), flags=TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
        for i, request in enumerate(self.requests):
            if i in self.errors:
                continue
            sender = request.get_response_sender()
            if arrays is None:
                sender.send(flags=flags)
            else:
                sender.send(self._response(arrays, i), flags=flags)

    def _response(self, arrays: List[Tuple[str, np.ndarray]], index: int) -> InferenceResponse:
        """Request `index`'s rows of every output (views, no copy)."""
        cut = self.rows(index)
        return InferenceResponse([Tensor(name, array[cut]) for name, array in arrays])

    def _check_outputs(self, outputs: Outputs) -> List[Tuple[str, np.ndarray]]:
        if isinstance(outputs, Mapping):
            items = [(n, v.as_numpy() if isinstance(v, Tensor) else v) for n, v in outputs.items()]
        else:
            items = [(t.name(), t.as_numpy()) for t in outputs]
        arrays = []
        for name, array in items:
            if not isinstance(array, np.ndarray):
                raise TritonModelException(
                    f"RequestBatch: output '{name}' must be a numpy.ndarray or a pb_utils."
                    f"Tensor, got {type(array).__name__}"
                )
            if array.ndim == 0 or array.shape[0] != len(self):
                rows = "no rows (a scalar)" if array.ndim == 0 else f"{array.shape[0]} rows"
                raise TritonModelException(
                    f"RequestBatch: output '{name}' has {rows}; the batch has {len(self)} "
                    f"(requests of {', '.join(map(str, self.sizes))} rows): return one row per "
                    "stacked input row, in the same order"
                )
            arrays.append((name, array))
        return arrays


def batch_requests(
    requests: Sequence[Any],
    inputs: Optional[Sequence[str]] = None,
    pad: Any = None,
) -> Tuple[Dict[str, np.ndarray], RequestBatch]:
    """Stack the requests' inputs along dim 0.

    `inputs`: the input names to gather (default: every input of the requests). `pad`: a
    value (or a mapping of input name to value) to pad ragged inputs with up to the largest
    trailing dims of the batch; without it trailing dims must be equal. Returns the stacked
    arrays by name and the :class:`RequestBatch` that splits outputs back.
    """
    names = set(inputs) if inputs is not None else None
    pads = pad if isinstance(pad, Mapping) else None
    gathered: List[Dict[str, np.ndarray]] = []
    for request in requests:
        arrays = {}
        for tensor in request.inputs():
            if names is None or tensor.name() in names:
                arrays[tensor.name()] = tensor.as_numpy()
        gathered.append(arrays)

    def padded(name: str) -> bool:
        return pad is not None and (pads is None or name in pads)

    def signature(arrays: Dict[str, np.ndarray]) -> _Signature:
        return tuple(
            sorted(
                (n, a.dtype.str, (a.ndim,) if padded(n) else a.shape[1:]) for n, a in arrays.items()
            )
        )

    signatures = [signature(a) for a in gathered]
    # The most common signature sets the batch (ties: the earliest request's).
    counts = Counter(signatures)
    reference = max(signatures, key=lambda s: (counts[s], -signatures.index(s)), default=())
    errors: Dict[int, TritonError] = {}
    sizes: List[int] = []
    for i, (arrays, sig) in enumerate(zip(gathered, signatures)):
        problem = _mismatch(arrays, sig, reference, counts[reference], padded)
        if problem is None:
            rows = {a.shape[0] for a in arrays.values()}
            if len(rows) > 1:
                per_input = ", ".join(f"'{n}' {a.shape[0]}" for n, a in arrays.items())
                problem = f"its inputs have different numbers of rows ({per_input})"
        if problem is not None:
            request_id = requests[i].request_id()
            named = f" (id '{request_id}')" if request_id else ""
            errors[i] = TritonError(
                f"batch_requests: request {i} of {len(requests)}{named} cannot be batched with "
                f"the others: {problem}",
                TritonError.INVALID_ARG,
            )
            sizes.append(0)
        else:
            sizes.append(next(iter(arrays.values())).shape[0] if arrays else 0)

    shapes: List[Optional[Dict[str, Tuple[int, ...]]]] = [
        None if i in errors else {n: a.shape for n, a in arrays.items()}
        for i, arrays in enumerate(gathered)
    ]
    kept = [a for i, a in enumerate(gathered) if i not in errors]
    for name, _, _ in reference:
        if padded(name) and kept:
            value = pads[name] if pads is not None else pad
            for a, p in zip(kept, pad_to_common([a[name] for a in kept], value)):
                a[name] = p
    stacked = stack(kept, [name for name, _, _ in reference])
    return stacked, RequestBatch(requests, sizes, errors, shapes)


def _mismatch(
    arrays: Dict[str, np.ndarray],
    sig: _Signature,
    reference: _Signature,
    agreeing: int,
    padded: Any,
) -> Optional[str]:
    """Why a request's inputs differ from the batch's, or None."""
    if sig == reference:
        if any(a.ndim == 0 for a in arrays.values()):
            return "an input is a scalar: stacking needs a batch dimension (dim 0)"
        return None
    others = f"{agreeing} other request{'s' if agreeing != 1 else ''}"
    want = {n: (d, s) for n, d, s in reference}
    for name in want:
        if name not in arrays:
            return f"input '{name}' is missing, which {others} of this batch have"
    for name, array in arrays.items():
        if name not in want:
            return (
                f"it has input '{name}', which {others} of this batch lack "
                "(pass inputs=[...] to gather only some)"
            )
        dtype, dims = want[name]
        if array.dtype.str != dtype:
            return f"input '{name}' is {array.dtype}, {others} have {np.dtype(dtype)}"
        if padded(name) and (array.ndim,) != dims:
            return f"input '{name}' has {array.ndim} dimensions, {others} have {dims[0]}"
        if not padded(name) and array.shape[1:] != dims:
            return (
                f"input '{name}' has shape {list(array.shape)}, {others} have rows of "
                f"{list(dims)} (pass pad=... to batch_requests to pad ragged inputs)"
            )
    return "its inputs differ from the batch's"  # pragma: no cover - covered above
