"""PyTriton's exception classes (``pytriton.exceptions``), same names and hierarchy."""

from __future__ import annotations


class MessageError(Exception):
    """An exception with PyTriton's ``.message``."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self._message = message

    @property
    def message(self) -> str:
        return self._message


class PyTritonError(MessageError):
    """Base of every error this API raises."""


class PyTritonValidationError(PyTritonError):
    """Invalid values were given (a configuration, a callable's outputs)."""


class PyTritonInvalidOperationError(PyTritonError):
    """The operation is not allowed in this state (binding after stop, ...)."""


class PyTritonBadParameterError(PyTritonError):
    """A parameter is out of its range."""


class PyTritonModelConfigError(PyTritonError):
    """The model configuration cannot be built."""


class PyTritonUnrecoverableError(PyTritonError):
    """Raise it from an inference callable to fail its requests and then stop the server."""


class PyTritonRuntimeError(PyTritonError):
    """Something failed while serving."""
