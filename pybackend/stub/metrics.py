"""Custom metrics in the stub: pb_utils' metric calls as METRIC_* messages on the async
channel (docs/protocol.md). Creation, value and updates are RPCs answered by the backend's
monitor thread, so they work from ``initialize``, ``execute`` and any thread the model starts;
a family delete is one-way and queued (it comes from ``__del__``)."""

from __future__ import annotations

from typing import Dict, List, Optional

from ..ipc import codec, rpc_codec
from ..ipc.protocol import MessageKind
from ..utils.errors import TritonModelException
from .state import RpcError, StubState

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
        body = rpc_codec.encode_metric_family_new(kind, name, description)
        return rpc_codec.decode_id_payload(self._metric_rpc(MessageKind.METRIC_FAMILY_NEW, body))

    def metric_family_delete(self, family_id: int) -> None:
        self.state.queue_oneway(MessageKind.METRIC_FAMILY_DELETE, rpc_codec.encode_token(family_id))

    def metric_new(
        self, family_id: int, labels: Dict[str, str], buckets: Optional[List[float]]
    ) -> int:
        body = rpc_codec.encode_metric_new(family_id, labels, buckets)
        return rpc_codec.decode_id_payload(self._metric_rpc(MessageKind.METRIC_NEW, body))

    def metric_op(self, op: str, metric_id: int, value: float) -> float:
        kind = _OPS[op]
        payload = self._metric_rpc(kind, rpc_codec.encode_metric_op(kind, metric_id, value))
        if kind == MessageKind.METRIC_VALUE:
            return rpc_codec.decode_value_payload(payload)
        return 0.0
