"""Cannot even be imported: a name error at module level, on line 5."""

import numpy as np

THRESHOLD = np.float32(undefined_setting)  # noqa: F821


class TritonPythonModel:
    def execute(self, requests):
        return []
