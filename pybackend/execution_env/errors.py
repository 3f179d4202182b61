"""The one error of this package."""


class EnvError(Exception):
    """EXECUTION_ENV_PATH cannot be used; the message names the path and the fix."""
