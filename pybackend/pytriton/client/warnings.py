"""PyTriton's client warnings (``pytriton.client.warnings``)."""

from __future__ import annotations


class PyTritonWarning(UserWarning):
    """Base of this API's warnings."""


class NotSupportedTimeoutWarning(PyTritonWarning):
    """A timeout the client cannot apply (tritonclient.grpc has none but for inference)."""
