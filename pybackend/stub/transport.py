"""The pb_utils transport inside the stub: logs, response-sender sends, cancellation
queries and custom metrics travel on the async channel."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional, Tuple

from ..ipc import codec, rpc_codec
from ..ipc.protocol import MessageKind
from ..utils.errors import TritonModelException
from ..utils.transport import Transport
from .bls import BLS_ONLY_IN_EXECUTE, BlsClient
from .metrics import MetricsClient
from .model_control import model_control
from .outputs import Placer
from .state import RpcError, StubState, fork_refusal

if TYPE_CHECKING:  # pragma: no cover
    from ..utils.request import InferenceRequest
    from ..utils.response import InferenceResponse

_SEND = int(MessageKind.SEND)


class StubTransport(MetricsClient, Transport):
    def __init__(self, state: StubState, model_dir: str = "") -> None:
        self.state = state
        self.model_dir = model_dir
        self.bls = BlsClient(state)
        self.phase = "initialize"  # set by the stub from INIT

    def log(self, level: int, filename: str, line: int, message: str) -> None:
        self.state.log.log(level, filename, line, message)

    def send_response(
        self, request: "InferenceRequest", response: Optional["InferenceResponse"], flags: int
    ) -> None:
        if self.state.forked:
            raise TritonModelException(fork_refusal(self.state.instance, "Sending a response"))
        placer = Placer(self.state, for_send=True)
        try:
            # The SEND body is built in one buffer (codec.encode_send's layout): a
            # decoupled model sends one per response, so every copy shows.
            body: bytes | bytearray
            if response is not None:
                head = codec.SEND_HEAD.pack(request._token, flags, 1)
                rules = self.state.output_rules  # None unless PYBACKEND_STRICT_OUTPUTS
                if rules is not None:
                    response = rules.check(response, request._requested).response
                body = placer.response(response, request._requested, head)
            else:
                body = codec.SEND_HEAD.pack(request._token, flags, 0)
            self.state.async_.send(_SEND, body)
            if flags:
                self.state.request_finished(request._token)
        except OSError as e:
            placer.abort()
            raise TritonModelException(
                f"Unable to send response: the backend is gone ({e})."
            ) from None
        except BaseException:
            placer.abort()
            raise

    def free_memory(self) -> int:
        arena = self.state.arena
        if arena is None:
            return 0
        # Segments are made on first use: until then, the first one's size is what is free.
        return max(arena.total_size, arena.default_size) - arena.used_bytes

    def empty_array(self, shape: Tuple[int, ...], dtype: Any) -> Any:
        arena = self.state.arena
        if arena is None or self.state.forked:
            # Not initialised yet (auto_complete_config), or a forked process, whose copy of
            # the arena must not allocate: process memory.
            return super().empty_array(shape, dtype)
        return arena.empty_array(shape, dtype)

    def sender_created(self, request: "InferenceRequest", sender: object) -> None:
        self.state.watch_sender(request, sender)

    def is_cancelled(self, request: "InferenceRequest") -> bool:
        try:
            payload = self.state.rpc(
                MessageKind.IS_CANCELLED, rpc_codec.encode_token(request._token)
            )
        except RpcError as e:
            raise TritonModelException(
                f"Failed to check whether the request is cancelled: {e}"
            ) from None
        if payload.nbytes < 1:
            raise TritonModelException(
                "Failed to check whether the request is cancelled: empty reply"
            )
        return bool(payload[0])

    def _refuse_in_auto_complete(self, what: str) -> None:
        # The auto-complete stub belongs to no model instance: nobody would answer.
        if self.phase == "auto_complete":
            raise TritonModelException(
                f"{what} is not available in auto_complete_config: the model has no instance "
                "yet. Call it from initialize or execute instead."
            )

    def _refuse_in_finalize(self) -> None:
        # The original's rule and text (spec 2.3); initialize is allowed here (UV-30).
        if self.phase == "finalize":
            raise TritonModelException(BLS_ONLY_IN_EXECUTE)

    def bls_exec(self, request: "InferenceRequest", decoupled: bool) -> Any:
        self._refuse_in_auto_complete("BLS (InferenceRequest.exec)")
        self._refuse_in_finalize()
        return self.bls.exec(request, decoupled)

    def bls_async_exec(self, request: "InferenceRequest", decoupled: bool) -> Any:
        self._refuse_in_auto_complete("BLS (InferenceRequest.async_exec)")
        self._refuse_in_finalize()
        return self.bls.async_exec(request, decoupled)

    def model_control(self, op: str, **kwargs: Any) -> Any:
        self._refuse_in_auto_complete(f"pb_utils.{op}")
        return model_control(self.state, self.state.instance, op, **kwargs)
