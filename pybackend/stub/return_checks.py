"""What ``execute`` may return, in the original's words: shared by the stub's dispatcher and
the offline harness, so a model refused by one is refused by the other with the same text."""

from __future__ import annotations

from typing import Any, Optional


def decoupled_return(instance: str, ret: Any) -> Optional[str]:
    """The error for a decoupled model's return value, or None when it is fine (None)."""
    if ret is None:
        return None
    return (
        f"Python model '{instance}' is using the decoupled mode and the execute function must "
        "return None."
    )


def default_return(ret: Any, count: int) -> Optional[str]:
    """The error for a default-mode return value (not None) answering ``count`` requests, or
    None when it is a list of the right length (its items are checked one by one)."""
    if not isinstance(ret, list):
        return f"Expected a list in the execute return, found type '{type(ret)}'."
    if len(ret) != count:
        return (
            "Number of InferenceResponse objects do not match the number of InferenceRequest "
            f"objects. InferenceRequest(s) size is:{count}, and InferenceResponse(s) "
            f"size is:{len(ret)}\n"
        )
    return None


def wrong_item(resp: Any) -> str:
    return (
        "Expected an 'InferenceResponse' object in the execute function return list, "
        f"found type '{type(resp)}'."
    )


def never_answered(what: str) -> str:
    """A request that got no response and whose sender was never taken (``what``: how)."""
    return (
        f"{what} and its response sender sent nothing, so the request would never complete. "
        "Return an InferenceResponse for it or send one with request.get_response_sender()."
    )


def rescheduled_with_response(resp: Any) -> str:
    """A response returned for a request the model rescheduled (the original's typo kept)."""
    return (
        "Expected a None object in the execute function return list for reschduled request, "
        f"found type '{type(resp)}'."
    )
