"""The one error of this package."""

from ..errors import PybackendError


class EnvError(PybackendError):
    """EXECUTION_ENV_PATH cannot be used; the message names the path and the fix."""
