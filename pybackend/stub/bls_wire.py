"""BLS requests and responses as the stub sends and reads them: an ``InferenceRequest`` as
a BLS_EXEC description (its inputs placed by the caller), a BLS_RESPONSE as the
``InferenceResponse`` the model gets (outputs are zero-copy views of the backend's arena,
or of a GPU allocation lent to the stub, both held by the ledger), and the error responses
of calls that fail before the callee sees them."""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from ..ipc.bls_codec import UNDELIVERED, BlsExecDesc, decode_bls_response, encode_bls_exec
from ..ipc.codec import ProtocolError, ResponseDesc, TensorDesc
from ..ipc.protocol import Location
from ..utils.errors import ErrorCode, TritonError
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .ledger import Ledger
from .outputs import Placer
from .response_iterator import UndeliveredResponse

FINAL = 1  # TRITONSERVER_RESPONSE_COMPLETE_FINAL
_EMPTY = np.empty(0, np.uint8)


def exec_desc(request: InferenceRequest, decoupled: bool, inputs: List[TensorDesc]) -> BlsExecDesc:
    """The BLS_EXEC description of ``request`` with its inputs already placed."""
    pm = request._preferred_memory
    return BlsExecDesc(
        request._model_name,
        request._model_version,
        decoupled,
        request._request_id,
        request._correlation_id,
        request._flags,
        request._timeout,
        int(pm.preferred_memory_type) if pm is not None else 2,
        pm.preferred_device_id if pm is not None else 0,
        request._parameters if request._parameters != "{}" else "",
        list(request._requested),
        inputs,
        request._trace._token if request._trace is not None else 0,
    )


def encode_exec(placer: Placer, desc: BlsExecDesc) -> bytearray:
    try:
        return encode_bls_exec(desc)
    except BaseException:
        placer.abort()
        raise


def no_room(model_name: str, e: MemoryError) -> InferenceResponse:
    return error_response(
        f"the inputs of the request to model '{model_name}' do not fit in shared memory: {e}"
    )


def error_response(text: str) -> InferenceResponse:
    return InferenceResponse(error=TritonError(f"BLS request failed: {text}", ErrorCode.INTERNAL))


def decode_response(ledger: Ledger, body: memoryview) -> Tuple[bool, Optional[InferenceResponse]]:
    """(is_final, response or None) of a BLS_RESPONSE's ``body``."""
    owned = bytearray(body)  # inline outputs view it; the channel reuses its buffer
    flags, desc = decode_bls_response(owned)
    resp = None if desc is None else response_of(ledger, desc)
    if resp is not None and flags & UNDELIVERED and resp.has_error():
        resp = UndeliveredResponse(error=resp.error())
    return bool(flags & FINAL), resp


def response_of(ledger: Ledger, desc: ResponseDesc) -> InferenceResponse:
    """The model's response to a call, its outputs wrapped (and held) by ``ledger``."""
    if desc.error is not None:
        code, message = desc.error
        if not 0 <= code <= ErrorCode.CANCELLED:
            code = ErrorCode.INTERNAL
        return InferenceResponse(error=TritonError(message, ErrorCode(code)))
    tensors = []
    done = 0
    try:
        for td in desc.outputs:
            tensors.append(_tensor(ledger, td))
            done += 1
    except Exception as e:  # noqa: BLE001 - a bad output fails this response only
        # The failed one returned its own; those after it were never wrapped.
        ledger.give_back_unwrapped(desc.outputs[done + 1 :])
        return error_response(f"cannot read the BLS response: {e}")
    return InferenceResponse._received(tensors, desc.parameters)


def _tensor(ledger: Ledger, td: TensorDesc) -> Tensor:
    n = td.byte_size
    if td.location == Location.INLINE:
        return Tensor._from_buffer(td.name, td.dtype, td.dims, td.data if n else _EMPTY)  # type: ignore[arg-type]
    if td.location == Location.GPU_IPC:  # preferred_memory GPU: lent until the tensor dies
        ref: Any = td.data
        try:
            on_gpu = ledger.map_gpu(ref, n)
        except BaseException:
            if ref.hold:
                ledger.give_back_hold(ref.hold)
            raise
        return Tensor._on_device(td.name, td.dtype, td.dims, on_gpu)
    if td.location != Location.BACKEND_ARENA:
        raise ProtocolError(f"output '{td.name}' has location {td.location}")
    name, dtype, dims = td.name, td.dtype, td.dims
    try:
        return ledger.wrap(
            td.seg, td.offset, n, lambda buf: Tensor._from_buffer(name, dtype, dims, buf)
        )
    except BaseException:
        ledger.give_back_unwrapped([td])  # nothing holds its block (if it names one)
        raise
