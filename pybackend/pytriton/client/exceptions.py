"""The client's exceptions (``pytriton.client.exceptions``)."""

from __future__ import annotations

from ..exceptions import MessageError


class PyTritonClientError(MessageError):
    """Base of the clients' errors (not a PyTritonError, as in PyTriton)."""


class PyTritonClientValueError(PyTritonClientError):
    pass


class PyTritonClientInvalidUrlError(PyTritonClientValueError):
    pass


class PyTritonClientTimeoutError(PyTritonClientError):
    pass


class PyTritonClientModelUnavailableError(PyTritonClientError):
    pass


class PyTritonClientClosedError(PyTritonClientError):
    pass


class PyTritonClientModelDoesntSupportBatchingError(PyTritonClientError):
    pass


class PyTritonClientInferenceServerError(PyTritonClientError):
    pass


class PyTritonClientQueueFullError(PyTritonClientError):
    pass
