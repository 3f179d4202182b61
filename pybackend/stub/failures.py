"""The backend's words for a failure, as clients and models read them (spec: the original's
texts, verbatim). The stub, and the offline harness that answers as it does, build them here."""

from __future__ import annotations


def failed_requests_text(instance: str, message: str) -> str:
    """What a request whose execute failed gets (and what the stub logs of it): ``instance``
    is the model instance's name, ``message`` the cause."""
    return f"Failed to process the request(s) for model '{instance}', message: {message}"


def failed_request_text(instance: str, message: str) -> str:
    """The backend's refusal of a model's call to one of its services (custom metrics, model
    control), as the backend words it in its reply to the stub."""
    return f"Failed to process the request for model '{instance}', message: {message}"


def finalize_failed_text(instance: str, message: str) -> str:
    """What the stub logs (at INFO, and the unload goes on) when ``finalize`` raised."""
    return f"Failed to finalize the model '{instance}': {message}"
