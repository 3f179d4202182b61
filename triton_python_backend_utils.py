"""Drop-in ``triton_python_backend_utils`` (``import triton_python_backend_utils as pb_utils``).

A thin re-export: every name resolves to :mod:`pybackend.utils`, whether ``model.py``
runs in pybackend's stub, in the offline harness, or in a plain interpreter.
"""

from pybackend.utils import *  # noqa: F401,F403
from pybackend.utils import __all__  # noqa: F401
