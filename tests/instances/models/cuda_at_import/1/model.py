"""Stands for a model.py whose import initialized CUDA (torch moved something to the GPU at
module level): a stand-in `torch` module says so, which is what a fork host checks."""

import sys
import types

_torch = types.ModuleType("torch")
_torch.cuda = types.SimpleNamespace(is_initialized=lambda: True)
sys.modules.setdefault("torch", _torch)


class TritonPythonModel:
    def execute(self, requests):
        return []
