"""What a client reads from the responses of a :class:`ModelHarness`'s model: only the
outputs it asked for, BYTES decoded as a client decodes them, and a stream that ends where
the model acknowledged the client's cancel."""

from __future__ import annotations

from typing import List, Optional, Protocol, Set, Tuple

import numpy as np

from ..utils.bytes_codec import serialize_to_bytes, split_bytes, to_object_array
from ..utils.errors import ErrorCode
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from .harness_errors import InferError
from .outputs import is_requested
from .results import Outputs, parameters_from_json


class Requested(Protocol):
    """What a client's reading of a response needs of its request (an InferenceRequest, or
    :class:`OutputNames` where the harness must not keep the request alive)."""

    def requested_output_names(self) -> Set[str]: ...


class OutputNames:
    """The requested outputs of a request, without the request: the harness keeps no
    reference to a request the model may drop (harness_drops.py)."""

    __slots__ = ("_names",)

    def __init__(self, req: InferenceRequest) -> None:
        self._names: Tuple[str, ...] = tuple(req._requested)

    def requested_output_names(self) -> Set[str]:
        return set(self._names)


def filtered(resp: InferenceResponse, req: Requested) -> InferenceResponse:
    """Only the requested outputs, as Triton returns them (outputs.is_requested)."""
    wanted = req.requested_output_names()
    if resp.has_error():
        return resp
    kept = InferenceResponse([t for t in resp.output_tensors() if is_requested(t.name(), wanted)])
    kept._parameters = resp._parameters  # the response's parameters travel with it
    return kept


def stream_outputs(
    responses: List[InferenceResponse], req: Requested, cancelled: bool
) -> List[Outputs]:
    out = []
    for resp in responses:
        err = resp.error()
        if cancelled and err is not None and err.code() == ErrorCode.CANCELLED:
            break  # the model acknowledged the client's cancel: the stream ends here
        out.append(response_outputs(resp, req))
    return out


def response_outputs(resp: Optional[InferenceResponse], req: Requested) -> Outputs:
    """The outputs a client gets from ``resp``; an error response raises InferError."""
    if resp is None:
        raise InferError("no response")
    err = resp.error()
    if err is not None:
        raise InferError(err.message(), int(err.code()))
    kept = filtered(resp, req)
    return Outputs(
        ((t.name(), _as_client_sees(t._host_copy())) for t in kept.output_tensors()),
        parameters_from_json(kept.parameters()),
    )


def _as_client_sees(array: np.ndarray) -> np.ndarray:
    """BYTES outputs as a client decodes them: an object array of bytes, whatever the model
    made them from (str objects, numpy 'S' or 'U' arrays)."""
    if array.dtype.kind not in "OSU":
        return array
    return to_object_array(split_bytes(serialize_to_bytes(array))).reshape(array.shape)
