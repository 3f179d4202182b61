"""Wire-format constants shared with ``csrc/ipc/protocol.h`` (see docs/protocol.md).

``tests/ipc/test_protocol_agreement.py`` checks that every name here has the same value
in the C++ header, so the two sides cannot drift apart silently.
"""

from __future__ import annotations

import enum
import struct

PROTOCOL_VERSION = 5
HEADER_SIZE = 16
MAX_INLINE_BODY = 131072
MAX_DATAGRAM = 262144
DEFAULT_INLINE_THRESHOLD = 4096
FLAG_INDIRECT = 1
SYNC_FD = 3
ASYNC_FD = 4
# The segment id of GPU holds: a FREE's BlockRef (GPU_HOLD_SEG, hold) releases the device
# memory its owner kept alive for a GPU_IPC tensor (docs/protocol.md, "GPU tensors").
GPU_HOLD_SEG = 4294967295
GPU_IPC_HANDLE_SIZE = 64

HEADER = struct.Struct("<HHIQ")
assert HEADER.size == HEADER_SIZE


class MessageKind(enum.IntEnum):
    HELLO = 1
    INIT = 2
    INIT_REPLY = 3
    EXECUTE = 4
    RESULT = 5
    FINALIZE = 6
    FINALIZE_REPLY = 7
    SEGMENT_ADD = 16
    SEGMENT_DROP = 17
    FREE = 18
    LOG = 32
    SEND = 33
    REPLY = 34
    IS_CANCELLED = 35
    SENDER_DROPPED = 36
    BLS_EXEC = 40
    BLS_RESPONSE = 41
    BLS_CANCEL = 42
    # Custom metrics (60-79); all but METRIC_FAMILY_DELETE get a REPLY.
    METRIC_FAMILY_NEW = 60
    METRIC_FAMILY_DELETE = 61
    METRIC_NEW = 62
    METRIC_VALUE = 63
    METRIC_INCREMENT = 64
    METRIC_SET = 65
    METRIC_OBSERVE = 66
    MODEL_LOAD = 80
    MODEL_UNLOAD = 81
    MODEL_READY = 82
    # backend -> stub on sync, with the fd of the sync lane's page (ipc/lane.py)
    LANE = 90
    # backend -> a process serving models itself (attach mode), on the connection that
    # becomes sync, with the fd of the async channel; json {model_name, model_version,
    # instance_name}
    ATTACH = 91


class Owner(enum.IntEnum):
    BACKEND = 1
    STUB = 2


class Location(enum.IntEnum):
    INLINE = 0
    BACKEND_ARENA = 1
    STUB_ARENA = 2
    GPU_IPC = 3


class ResultStatus(enum.IntEnum):
    OK = 0
    BATCH_ERROR = 1


class ResultKind(enum.IntEnum):
    NONE = 0
    RESPONSE = 1
