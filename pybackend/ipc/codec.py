"""Encoding and decoding of message bodies (docs/protocol.md, "Primitive encodings" onward):
the one module the stub, the offline driver and the tests import (``codec.encode_free``).

The code lives in one module per part of the protocol; this module re-exports the same
objects (no wrappers, so the hot path calls :func:`decode_execute` itself):

* :mod:`.primitives`: the struct layouts, ``str``/``blob``, :class:`Reader`, ProtocolError
* :mod:`.tensor_codec`: TensorDesc (inline, arena, GPU_IPC)
* :mod:`.response_codec`: ResponseBody, and SEND which carries one
* :mod:`.execute_codec`: ExecuteBody (the stub's hot-path decoder)
* :mod:`.result_codec`: ResultBody
* :mod:`.free_codec`: FREE, and the freed trailer of EXECUTE and RESULT
* :mod:`.control_codec`: HELLO, json, LOG, SEGMENT_ADD/DROP, INDIRECT, REPLY
* :mod:`.bls_codec` (imported on its own): BLS and model control
"""

from __future__ import annotations

from .control_codec import (
    decode_hello,
    decode_indirect,
    decode_json,
    decode_log,
    decode_reply,
    decode_segment_add,
    decode_segment_drop,
    encode_hello,
    encode_indirect,
    encode_json,
    encode_log,
    encode_reply,
    encode_segment_add,
    encode_segment_drop,
)
from .execute_codec import (
    RequestDesc,
    decode_execute,
    encode_execute,
    put_correlation_id,
    put_outputs_and_inputs,
)
from .free_codec import append_freed, decode_free, encode_free
from .primitives import (
    BLOCK_REF,
    ERROR_HEAD,
    F64,
    FLAGS_TIMEOUT,
    FREE_HEAD,
    GPU_REF,
    HELLO_HEAD,
    I64,
    INDIRECT,
    LOG_HEAD,
    PER_RESULT,
    REQUEST_HEAD,
    RESULT_OK_HEAD,
    SEGMENT_ADD,
    SEGMENT_DROP,
    SEND_HEAD,
    SEQ_N,
    TENSOR_HEAD,
    U8,
    U16,
    U32,
    U64,
    Buffer,
    ProtocolError,
    Reader,
    put_blob,
    put_str,
)
from .response_codec import (
    FAILURE,
    MODEL_ERROR,
    ResponseDesc,
    decode_send,
    encode_send,
    put_response,
    read_response,
)
from .result_codec import (
    ResultDesc,
    begin_result,
    decode_result,
    encode_result,
    encode_result_error,
    end_result,
)
from .tensor_codec import GpuRef, TensorDesc, put_tensor, read_tensor

__all__ = [
    "BLOCK_REF",
    "ERROR_HEAD",
    "FAILURE",
    "F64",
    "FLAGS_TIMEOUT",
    "FREE_HEAD",
    "GPU_REF",
    "HELLO_HEAD",
    "I64",
    "INDIRECT",
    "LOG_HEAD",
    "MODEL_ERROR",
    "PER_RESULT",
    "REQUEST_HEAD",
    "RESULT_OK_HEAD",
    "SEGMENT_ADD",
    "SEGMENT_DROP",
    "SEND_HEAD",
    "SEQ_N",
    "TENSOR_HEAD",
    "U8",
    "U16",
    "U32",
    "U64",
    "Buffer",
    "GpuRef",
    "ProtocolError",
    "Reader",
    "RequestDesc",
    "ResponseDesc",
    "ResultDesc",
    "TensorDesc",
    "append_freed",
    "begin_result",
    "decode_execute",
    "decode_free",
    "decode_hello",
    "decode_indirect",
    "decode_json",
    "decode_log",
    "decode_reply",
    "decode_result",
    "decode_segment_add",
    "decode_segment_drop",
    "decode_send",
    "encode_execute",
    "encode_free",
    "encode_hello",
    "encode_indirect",
    "encode_json",
    "encode_log",
    "encode_reply",
    "encode_result",
    "encode_result_error",
    "end_result",
    "encode_segment_add",
    "encode_segment_drop",
    "encode_send",
    "put_blob",
    "put_correlation_id",
    "put_outputs_and_inputs",
    "put_response",
    "put_str",
    "put_tensor",
    "read_response",
    "read_tensor",
]
