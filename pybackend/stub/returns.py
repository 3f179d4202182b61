"""What ``execute`` may return and how each output is checked: the one place of these rules.

The stub (its dispatcher for the return value, its transport for a response sender's sends)
and the offline harness (in-process and stub-process engines) call this module, so a model is
accepted or refused, and an output passed or flagged, the same way offline and in the server.

* :func:`runs_as_coroutine`: whether that return value is run as a coroutine first.
* :func:`judge_return`: the return value of one ``execute``, in the original's words: a
  verdict per request, or :class:`ReturnRefused` that fails the whole batch.
* :class:`OutputRules`: the outputs of a response against config.pbtxt's ``output`` section.
  By default (the original's behaviour) nothing is refused: an output whose data type or shape
  differs goes to Triton as the model made it, and clients get it as it is (NVIDIA's own
  ``examples/bls_decoupled`` returns INT64 for a TYPE_INT32 output). The offline harness still
  reports each difference (:class:`OutputMismatch`, as a warning). The model config parameter
  ``PYBACKEND_STRICT_OUTPUTS: "true"`` makes a difference an INVALID_ARG error response; only
  then does the stub check outputs at all (no per-output work on the default path).
"""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from types import CoroutineType, GeneratorType
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ..utils.dtypes import CODE_TO_KSERVE_NAME, TYPE_BYTES
from ..utils.errors import ErrorCode, TritonError, TritonModelException
from ..utils.request import TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, InferenceRequest
from ..utils.response import FailedRequestResponse, InferenceResponse
from .parameters import switch_parameter

STRICT_PARAMETER = "PYBACKEND_STRICT_OUTPUTS"

# What ``execute`` returned for one request (the first item of each verdict).
RESPONSE = 0  # its InferenceResponse (the second item)
SENDER = 1  # nothing: its response sender answers, or already did
UNANSWERED = 2  # nothing, and no sender was taken: the second item is the error's text
RESCHEDULED = 3  # released with RESCHEDULE: it comes back in a later execute

Verdict = Tuple[int, Any]

#: What ``asyncio.iscoroutine`` took in the Python of the original's stub (a generator too):
#: execute's return of one of these runs on the instance's event loop (so a generator fails
#: there, as on the original, instead of being judged as a list).
_COROUTINE_TYPES = (CoroutineType, GeneratorType, Coroutine)


def runs_as_coroutine(ret: Any) -> bool:
    """Whether ``execute``'s return value is run as a coroutine before it is judged."""
    return type(ret) is not list and isinstance(ret, _COROUTINE_TYPES)


class ReturnRefused(Exception):
    """What ``execute`` returned breaks a rule: every request of the batch fails with this
    text (the original's)."""


# ---------------------------------------------------------------------- the return value


def judge_return(
    ret: Any,
    requests: Sequence[InferenceRequest],
    decoupled: bool,
    instance: str,
    through_senders: bool = False,
) -> List[Verdict]:
    """One verdict per request for ``execute``'s return value ``ret``, or ReturnRefused.
    Takes the senders' part as the server does: a returned response claims the request's
    sender (an error if it already sent FINAL), and a request nobody can answer has its
    sender closed. ``through_senders``: the caller delivers the verdicts through the senders
    (a default-mode coroutine that ran in the background), so they are left as they are."""
    if decoupled:
        if ret is not None:
            raise ReturnRefused(decoupled_return_text(instance))
        return [
            (RESCHEDULED, None)
            if r._release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
            else (SENDER, None)
            for r in requests
        ]
    if ret is None:
        return [_nothing(r, "execute returned None", through_senders) for r in requests]
    if not isinstance(ret, list):
        raise ReturnRefused(f"Expected a list in the execute return, found type '{type(ret)}'.")
    if len(ret) != len(requests):
        raise ReturnRefused(
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            f"objects. InferenceRequest(s) size is:{len(requests)}, and InferenceResponse(s) "
            f"size is:{len(ret)}\n"
        )
    verdicts: List[Verdict] = []
    for req, resp in zip(requests, ret):
        if req._release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            if resp is not None:  # (the original's typo kept)
                raise ReturnRefused(
                    "Expected a None object in the execute function return list for "
                    f"reschduled request, found type '{type(resp)}'."
                )
            verdicts.append((RESCHEDULED, None))
        elif resp is None:
            verdicts.append(
                _nothing(req, "execute returned None for this request", through_senders)
            )
        elif type(resp) is InferenceResponse or isinstance(resp, InferenceResponse):
            if req._sender is not None and not through_senders:
                try:
                    req._sender._take_returned()
                except TritonModelException as e:
                    raise ReturnRefused(str(e)) from None
            verdicts.append((RESPONSE, resp))
        else:
            raise ReturnRefused(
                "Expected an 'InferenceResponse' object in the execute function return list, "
                f"found type '{type(resp)}'."
            )
    return verdicts


def decoupled_return_text(instance: str) -> str:
    """The original's text for a decoupled ``execute`` that returned a value."""
    return (
        f"Python model '{instance}' is using the decoupled mode and the execute function "
        "must return None."
    )


def refused_by_async_decoupled(requests: Sequence[InferenceRequest]) -> List[InferenceRequest]:
    """A decoupled ``async def execute`` returned a value or raised: the requests that end
    with the error (:func:`decoupled_return_text`, or the exception's traceback text). The
    original only logs it (its coroutine ran in the background): a request whose sender the
    model took stays open, as there, since the model may still answer it from a task or
    thread (qa response_sender); a dropped sender is reported when it is collected (after a
    raise, with the traceback text). A request whose sender was never taken can never be
    answered: it ends with the error (the original leaves it waiting forever). A plain
    ``def execute`` gets ReturnRefused from :func:`judge_return`, as on the original."""
    return [r for r in requests if r._sender is None]


def _nothing(req: InferenceRequest, what: str, through_senders: bool) -> Verdict:
    """No response for ``req`` in the return value. Fine when the model took its response
    sender (it answers, also after execute returned). A request whose sender was never taken
    can never be answered: the original leaves its client waiting forever (spec §10 QUIRK);
    we answer with an error instead."""
    if req._release_flags == TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
        return (RESCHEDULED, None)
    if req._sender is not None:
        return (SENDER, None)
    if not through_senders:  # the error goes out in its place: the sender is done
        req.get_response_sender()._close()
    return (UNANSWERED, never_answered(what))


def never_answered(what: str) -> str:
    """A request that got no response and whose sender was never taken (``what``: how)."""
    return (
        f"{what} and its response sender sent nothing, so the request would never complete. "
        "Return an InferenceResponse for it or send one with request.get_response_sender()."
    )


# ---------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class OutputMismatch:
    """One output that differs from config.pbtxt: ``text`` names the model instance, the
    output, what it is, what the configuration declares and the fix."""

    instance: str
    output: str
    text: str

    def __str__(self) -> str:
        return self.text


@dataclass(frozen=True)
class CheckedResponse:
    """A response as Triton passes it on (under strict outputs, the error response that
    replaces one with a mismatch), and the mismatches found in it."""

    response: InferenceResponse
    mismatches: Tuple[OutputMismatch, ...]


@dataclass(frozen=True)
class _Spec:
    data_type: str  # "TYPE_FP32" ...; "" when not declared
    dims: Tuple[int, ...]
    reshaped: bool  # a reshape: the shape the model sees differs from dims, so no shape check


class OutputRules:
    """The output section of one model's (completed) configuration. ``strict``: mismatches
    fail the response; None reads :data:`STRICT_PARAMETER` from the config (ParameterError for
    a value that is not a yes or a no)."""

    def __init__(
        self, config: Mapping[str, Any], instance: str, strict: Optional[bool] = None
    ) -> None:
        self.instance = instance
        self.strict = strict_outputs(config) if strict is None else strict
        self.batched = int(config.get("max_batch_size", 0) or 0) > 0
        self._specs: Dict[str, _Spec] = {}
        for o in config.get("output", []) or []:
            name = str(o.get("name", ""))
            if name:
                dims = tuple(int(d) for d in o.get("dims", []) or [])
                self._specs[name] = _Spec(str(o.get("data_type", "")), dims, "reshape" in o)

    def mismatches(self, outputs: Iterable[Tuple[str, int, Sequence[int]]]) -> List[OutputMismatch]:
        """Each output among ``outputs`` ((name, Triton type code, shape) each: those that go
        to Triton) that differs from its declaration."""
        if not self._specs:
            return []  # nothing declared: nothing to hold them against
        found = []
        for name, code, shape in outputs:
            text = self._wrong(name, code, list(shape))
            if text:
                found.append(OutputMismatch(self.instance, name, text))
        return found

    def check(
        self, response: InferenceResponse, requested: Optional[Iterable[str]] = None
    ) -> CheckedResponse:
        """``response`` (only its ``requested`` outputs go on, when given) held against the
        configuration: under strict outputs, the first mismatch replaces it with an
        INVALID_ARG error response."""
        if response._error is not None:
            return CheckedResponse(response, ())
        wanted = set(requested) if requested else None
        found = self.mismatches(
            (t._name, t._dtype, t._shape)
            for t in response._outputs
            if wanted is None or t._name in wanted
        )
        if found and self.strict:
            error = TritonError(found[0].text, ErrorCode.INVALID_ARG)
            return CheckedResponse(FailedRequestResponse(error=error), tuple(found))
        return CheckedResponse(response, tuple(found))

    def _wrong(self, name: str, code: int, shape: List[int]) -> str:
        what = f"output '{name}' of model instance '{self.instance}'"
        spec = self._specs.get(name)
        if spec is None:
            names = ", ".join(f"'{n}'" for n in self._specs)
            return (
                f"{what} is not declared in the model configuration (it declares {names}): "
                "return only declared outputs, or add it to config.pbtxt"
            )
        actual = "TYPE_STRING" if code == TYPE_BYTES else "TYPE_" + _type_name(code)
        if spec.data_type and actual != spec.data_type:
            return (
                f"{what} has data type {actual} but the model configuration declares "
                f"{spec.data_type}: convert the array (e.g. numpy astype) or fix config.pbtxt"
            )
        if spec.reshaped:
            return ""
        want = ([-1] if self.batched else []) + list(spec.dims)
        if len(want) != len(shape) or any(w >= 0 and w != s for w, s in zip(want, shape)):
            after = " after the batch dimension" if self.batched else ""
            return (
                f"{what} has shape {_text(shape)} but the model configuration declares "
                f"{_text(list(spec.dims))}{after} (-1: any size): "
                "reshape the array or fix config.pbtxt"
            )
        return ""


def strict_outputs(config: Union[str, Mapping[str, Any]]) -> bool:
    """The :data:`STRICT_PARAMETER` of a model configuration (a dict, or its JSON text)."""
    return switch_parameter(config, STRICT_PARAMETER)


def _type_name(code: int) -> str:
    return CODE_TO_KSERVE_NAME.get(code, "INVALID")


def _text(dims: List[int]) -> str:
    return "[" + ", ".join(str(d) for d in dims) + "]"
