"""Drop-in ``triton_python_backend_utils`` (``import triton_python_backend_utils as pb_utils``).

A thin re-export: every name resolves to :mod:`pybackend.utils`, whether ``model.py``
runs in pybackend's stub, in the offline harness, or in a plain interpreter.
"""

# The original's module imports these for itself and has no __all__, so a model that
# star-imports it gets json, struct and np too (and pb_utils.np works): so does ours.
import json  # noqa: F401
import struct  # noqa: F401

import numpy as np  # noqa: F401

from pybackend.utils import *  # noqa: F401,F403
from pybackend.utils import __all__ as _utils_all

__all__ = [*_utils_all, "json", "np", "struct"]
