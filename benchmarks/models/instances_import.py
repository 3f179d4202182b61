"""Issue 29's second benchmark model: the same work as instances_shared.py, but the 256 MiB
of weights are built at import time, at module level, as many model.py files load theirs:
one copy per process that imports the module (per instance under "own", one under "shared",
one in the parent under "fork", shared copy-on-write with the children). The import, the
weights and the work are instances_work.py's (copied next to this file).
"""

from .instances_work import build_weights, execute

WEIGHTS = build_weights()


class TritonPythonModel:
    def execute(self, requests):
        return execute(WEIGHTS, requests)
