"""The root of pybackend's own exceptions, so that a caller (the ``pybackend`` command
above all) can catch and report every failure of this package the same way.

Each part keeps its own class under its old name and import path (``EnvError``,
``ServerError``, ``ConfigError`` ...); they all derive from :class:`PybackendError`. Errors
that model code sees through pb_utils (``TritonModelException``, ``TritonError``) are not
here: they belong to the original's API and keep its hierarchy.
"""

from __future__ import annotations


class PybackendError(Exception):
    """An error of pybackend itself; the message says what failed and how to fix it."""


class ConfigError(PybackendError):
    """A model configuration (config.pbtxt, a parameter's value, what
    ``auto_complete_config`` returned) that cannot be used; the message names the file or
    the key and why."""
