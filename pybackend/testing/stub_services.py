"""What a :class:`StubModel`'s stub asks the backend for, answered in this process: BLS
calls (to other StubModels started here, or to fakes), readiness checks and custom metrics.
The real backend answers the same messages through tritonserver."""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, Set, Tuple

import numpy as np

from ..ipc import bls_codec, codec, rpc_codec
from ..ipc.channel import Channel, ChannelClosed
from ..ipc.protocol import MessageKind
from ..utils.errors import ErrorCode
from ..utils.request import InferenceRequest
from ..utils.response import InferenceResponse
from ..utils.tensor import Tensor
from .bls_responses import DECOUPLED_ONLY, fake_answer, refused_text
from .call_cycles import STUB_MODEL_CYCLES as CYCLES
from .call_cycles import Call, queue_expires, refusal_error
from .harness_errors import InferError
from .metric_store import MetricError, MetricStore, metric_refusal
from .stub_driver import StubDriver
from .transport import FINAL, BlsFake, MetricRecord, not_ready_text

if TYPE_CHECKING:  # pragma: no cover
    from .stub_model import StubModel


#: StubModels started in this process, by model name (each instance): the targets of BLS
#: calls.
_models: Dict[str, List["StubModel"]] = {}
_models_lock = threading.Lock()


def register(model: "StubModel") -> None:
    with _models_lock:
        _models.setdefault(model.model_name, []).append(model)
    CYCLES.add_instance(model.model_name, model.instance_name, queue_expires(model.config))


def unregister(model: "StubModel") -> None:
    with _models_lock:
        instances = _models.get(model.model_name, [])
        if model not in instances:
            return
        instances.remove(model)
        if not instances:
            del _models[model.model_name]
    CYCLES.remove_instance(model.model_name, model.instance_name)


class StubServices:
    """Installs the driver's handlers; ``fakes`` answer BLS calls to models by name."""

    def __init__(
        self,
        driver: StubDriver,
        fakes: Mapping[str, BlsFake],
        instance_name: str = "",
        metric_store: Optional[MetricStore] = None,
        model_name: str = "",
    ) -> None:
        self.driver = driver
        self.fakes = dict(fakes)
        self.instance_name = instance_name  # named in the metrics API's refusals
        self.model_name = model_name  # the caller of its stub's BLS calls
        #: Where the stub's custom metrics go, as the server keeps them (the instances of
        #: one model may share one, as they share tritonserver's registry).
        self.metric_store = metric_store if metric_store is not None else MetricStore()
        self._families: Set[int] = set()  # the ones this stub made
        self._lock = threading.Lock()
        self._streams: Dict[int, Tuple["StubModel", int]] = {}  # BLS call id -> live stream
        d = driver
        d.handlers[MessageKind.BLS_EXEC] = lambda msg: self._on_exec(msg, d.async_)
        d.sync_handlers[MessageKind.BLS_EXEC] = lambda msg: self._on_exec(msg, d.sync)
        d.handlers[MessageKind.BLS_CANCEL] = self._on_cancel
        d.handlers[MessageKind.MODEL_READY] = self._on_ready
        for kind in (MessageKind.MODEL_LOAD, MessageKind.MODEL_UNLOAD):
            d.handlers[kind] = self._on_model_control
        d.handlers[MessageKind.METRIC_FAMILY_NEW] = self._on_family_new
        d.handlers[MessageKind.METRIC_FAMILY_DELETE] = self._on_family_delete
        d.handlers[MessageKind.METRIC_NEW] = self._on_metric_new
        for kind in (
            MessageKind.METRIC_VALUE,
            MessageKind.METRIC_INCREMENT,
            MessageKind.METRIC_SET,
            MessageKind.METRIC_OBSERVE,
        ):
            d.handlers[kind] = self._on_metric_op

    # ------------------------------------------------------------------ BLS

    def _on_exec(self, msg: Any, channel: Channel) -> None:
        desc = bls_codec.decode_bls_exec(msg.body)
        arrays = {t.name: self.driver.array_of(t) for t in desc.inputs}
        # Only the stub's blocking exec() from execute comes on sync (stub/bls.py): its
        # execute waits on it, which is what may close a cycle (a timeout= does not end it).
        blocking = channel is self.driver.sync
        # Answered from a thread of its own: the callee may be this very stub (a model
        # calling itself) or call back into it, and the reader must stay free meanwhile.
        threading.Thread(
            target=self._answer,
            args=(channel, msg.id, desc, arrays, blocking),
            name="stub-model-bls",
            daemon=True,
        ).start()

    def _answer(
        self, channel: Channel, call_id: int, desc: Any, arrays: Dict[str, Any], blocking: bool
    ) -> None:
        def send(flags: int, resp: Optional[codec.ResponseDesc]) -> None:
            try:
                self._send(channel, call_id, flags, resp)
            except (ChannelClosed, OSError):
                pass  # the stub went away while the call ran: nobody is waiting any more

        try:
            responses = self._call(desc, arrays, call_id, send, blocking)
        except Exception as e:  # noqa: BLE001 - a fake may raise anything
            responses = [_error_desc(ErrorCode.INTERNAL, f"{type(e).__name__}: {e}")]
        if responses is None:
            return  # a live stream: its responses go out as the callee sends them
        if not desc.decoupled:
            send(FINAL, responses[0] if responses else codec.ResponseDesc())
        elif len(responses) == 1 and responses[0].error is not None:
            send(FINAL, responses[0])  # a refused call: the error is the whole stream
        else:
            for resp in responses:
                send(0, resp)
            send(FINAL, None)

    def _call(
        self, desc: Any, arrays: Dict[str, Any], call_id: int, send: Any, blocking: bool
    ) -> Optional[List[codec.ResponseDesc]]:
        """The call's responses, or None when they stream to ``send`` as they come."""
        name = desc.model_name
        fake = self.fakes.get(name)
        if fake is not None:
            request = InferenceRequest(
                request_id=desc.request_id,
                correlation_id=desc.correlation_id,
                inputs=[Tensor(n, a) for n, a in arrays.items()],
                requested_output_names=list(desc.requested_outputs),
                model_name=name,
                model_version=desc.model_version,
                parameters=json.loads(desc.parameters or "{}"),
            )
            return [self._from_response(r) for r in fake_answer(fake, request)]
        with _models_lock:
            targets = list(_models.get(name, ()))
        if not targets:
            return [_error_desc(ErrorCode.INTERNAL, not_ready_text(name))]
        target = CYCLES.route(name, targets)
        try:
            target.check_request(arrays, desc.request_id)
        except InferError as e:
            return [_error_desc(ErrorCode.INTERNAL, refused_text(name, e.message))]
        if target.decoupled and not desc.decoupled:
            refused = refused_text(name, DECOUPLED_ONLY.format(name))
            return [_error_desc(ErrorCode.INTERNAL, refused)]
        call: Optional[Call] = None
        if not desc.decoupled:
            call, refusal = CYCLES.begin((self.model_name, self.instance_name), name, blocking)
            if refusal:
                return [_error_desc(*refusal_error(name, refusal))]

        def emit(resp: Optional[Dict[str, Any]], final: bool) -> None:
            if final:
                with self._lock:
                    self._streams.pop(call_id, None)
                if call is not None:
                    CYCLES.end(call)  # answered: the caller runs on
            send(FINAL if final else 0, None if resp is None else self._from_dict(resp))

        try:
            token = target.stream_live(
                arrays,
                emit,
                requested=list(desc.requested_outputs),
                request_id=desc.request_id,
                correlation_id=desc.correlation_id,
                parameters=json.loads(desc.parameters or "{}"),
                call=call,
            )
        except BaseException:
            if call is not None:
                CYCLES.end(call)
            raise
        with self._lock:
            self._streams[call_id] = (target, token)
        return None

    def _on_cancel(self, msg: Any) -> None:
        with self._lock:
            live = self._streams.get(msg.id)
        if live is not None:
            live[0].cancel(live[1])

    def _from_dict(self, resp: Dict[str, Any]) -> codec.ResponseDesc:
        """A response of another StubModel (as its driver decoded it), to send on."""
        if resp.get("error") is not None:
            code, message = resp["error"]
            return _error_desc(code, message)
        return self._from_outputs(resp["outputs"], resp.get("parameters") or "{}")

    def _from_response(self, resp: InferenceResponse) -> codec.ResponseDesc:
        err = resp.error()
        if err is not None:
            return _error_desc(int(err.code()), err.message())
        outputs = {t.name(): t.as_numpy() for t in resp.output_tensors()}
        return self._from_outputs(outputs, resp.parameters())

    def _from_outputs(
        self, outputs: Mapping[str, np.ndarray], parameters: str = "{}"
    ) -> codec.ResponseDesc:
        tensors = [self.driver.make_input(n, np.asarray(a)) for n, a in outputs.items()]
        return codec.ResponseDesc(tensors, parameters)

    def _send(
        self, channel: Channel, call_id: int, flags: int, resp: Optional[codec.ResponseDesc]
    ) -> None:
        channel.send(MessageKind.BLS_RESPONSE, bls_codec.encode_bls_response(flags, resp), call_id)

    # ------------------------------------------------------------------ model control

    def _on_ready(self, msg: Any) -> None:
        name = codec.Reader(msg.body).str()
        with _models_lock:
            ready = name in _models or name in self.fakes
        self._reply(msg, payload=b"\x01" if ready else b"\x00")

    def _on_model_control(self, msg: Any) -> None:
        self._reply(
            msg,
            ok=False,
            code=int(ErrorCode.UNSUPPORTED),
            message="loading and unloading models needs a tritonserver in explicit model "
            "control mode: run this test with ServerModel (--pybackend-mode=server)",
        )

    # ------------------------------------------------------------------ metrics

    def metric_snapshot(self) -> Tuple[Dict[int, Tuple[str, str, int]], Dict[int, MetricRecord]]:
        """Copies of the families and series (a metrics endpoint reads them from its own
        thread while the reader thread changes them)."""
        return self.metric_store.snapshot()

    def _on_family_new(self, msg: Any) -> None:
        kind, name, description = rpc_codec.decode_metric_family_new(msg.body)
        try:
            fid = self.metric_store.family_new(name, description, kind)
        except MetricError as e:
            return self._refuse(msg, ErrorCode.INVALID_ARG, str(e))
        with self._lock:
            self._families.add(fid)
        self._reply(msg, payload=rpc_codec.encode_id_payload(fid))

    def _on_family_delete(self, msg: Any) -> None:
        fid = rpc_codec.decode_token(msg.body)
        with self._lock:
            self._families.discard(fid)
        self.metric_store.family_delete(fid)

    def forget_families(self) -> None:
        """The families the stub made and left (it exited, or died), gone with it, as the
        backend removes a stub's families when the stub ends."""
        with self._lock:
            families, self._families = self._families, set()
        for fid in families:
            self.metric_store.family_delete(fid)

    def _on_metric_new(self, msg: Any) -> None:
        fid, labels, buckets = rpc_codec.decode_metric_new(msg.body)
        try:
            mid = self.metric_store.metric_new(fid, labels, buckets)
        except KeyError:
            return self._reply(msg, ok=False, code=int(ErrorCode.NOT_FOUND), message="no family")
        self._reply(msg, payload=rpc_codec.encode_id_payload(mid))

    def _on_metric_op(self, msg: Any) -> None:
        mid, value = rpc_codec.decode_metric_op(msg.kind, msg.body)
        try:
            current = self.metric_store.op(_METRIC_OPS[msg.kind], mid, value)
        except KeyError:
            return self._reply(msg, ok=False, code=int(ErrorCode.NOT_FOUND), message="no metric")
        except MetricError as e:
            return self._refuse(msg, ErrorCode.INVALID_ARG, str(e))
        value_kind = msg.kind == MessageKind.METRIC_VALUE
        payload = rpc_codec.encode_value_payload(current) if value_kind else b""
        self._reply(msg, payload=payload)

    def _refuse(self, msg: Any, code: int, message: str) -> None:
        self._reply(
            msg, ok=False, code=int(code), message=metric_refusal(self.instance_name, message)
        )

    def _reply(
        self, msg: Any, *, ok: bool = True, code: int = 0, message: str = "", payload: bytes = b""
    ) -> None:
        try:
            self.driver.async_.send(
                MessageKind.REPLY, codec.encode_reply(ok, code, message, payload), msg.id
            )
        except (ChannelClosed, OSError):
            pass  # the stub is gone; its reader ends on the next recv


_METRIC_OPS = {
    MessageKind.METRIC_VALUE: "value",
    MessageKind.METRIC_INCREMENT: "increment",
    MessageKind.METRIC_SET: "set",
    MessageKind.METRIC_OBSERVE: "observe",
}


def _error_desc(code: int, message: str) -> codec.ResponseDesc:
    return codec.ResponseDesc((), "", (int(code), message))
