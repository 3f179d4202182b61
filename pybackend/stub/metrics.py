"""Custom metrics in the stub: pb_utils' metric calls as METRIC_* messages on the async
channel (docs/protocol.md). Creation, value and updates are RPCs answered by the backend's
monitor thread, so they work from ``initialize``, ``execute`` and any thread the model starts;
a family delete is one-way and queued (it comes from ``__del__``)."""

from __future__ import annotations

import struct
from typing import Dict, List, Optional

from ..ipc import codec
from ..ipc.protocol import MessageKind
from ..utils.errors import TritonModelException
from .state import RpcError, StubState

_ID = struct.Struct("<Q")
_ID_VALUE = struct.Struct("<Qd")
_F64 = struct.Struct("<d")
_OPS = {
    "value": MessageKind.METRIC_VALUE,
    "increment": MessageKind.METRIC_INCREMENT,
    "set": MessageKind.METRIC_SET,
    "observe": MessageKind.METRIC_OBSERVE,
}


class MetricsClient:
    """The metric half of the stub's pb_utils transport."""

    state: StubState

    def _metric_rpc(self, kind: int, body: codec.Buffer) -> memoryview:
        st = self.state
        st.flush_oneway()  # deletes queued before this call reach the backend first
        try:
            return st.rpc(kind, body)
        except RpcError as e:
            raise TritonModelException(str(e)) from None

    def metric_family_new(self, name: str, description: str, kind: int) -> int:
        body = bytearray(struct.pack("<B", kind))
        codec.put_str(body, name)
        codec.put_str(body, description)
        return _ID.unpack(self._metric_rpc(MessageKind.METRIC_FAMILY_NEW, body))[0]

    def metric_family_delete(self, family_id: int) -> None:
        self.state.queue_oneway(MessageKind.METRIC_FAMILY_DELETE, _ID.pack(family_id))

    def metric_new(
        self, family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
    ) -> int:
        body = bytearray(struct.pack("<QI", family_id, len(labels)))
        for key, value in labels.items():
            codec.put_str(body, key)
            codec.put_str(body, value)
        if buckets is None:
            body += b"\x00"
        else:
            body += struct.pack(f"<BI{len(buckets)}d", 1, len(buckets), *buckets)
        return _ID.unpack(self._metric_rpc(MessageKind.METRIC_NEW, body))[0]

    def metric_op(self, op: str, metric_id: int, value: float) -> float:
        kind = _OPS[op]
        if kind == MessageKind.METRIC_VALUE:
            return _F64.unpack(self._metric_rpc(kind, _ID.pack(metric_id)))[0]
        self._metric_rpc(kind, _ID_VALUE.pack(metric_id, value))
        return 0.0
