"""The stub's optional native helpers (csrc/stub_native), loaded with ctypes.

A plain C library rather than a CPython extension: it does not depend on the interpreter's
ABI or on numpy's C API, so the same file works in every environment a stub may run in
(EXECUTION_ENV_PATH included). Everything that uses it has a pure-Python path for when it
is missing (a source checkout without a build, ``PYBACKEND_SKIP_NATIVE=1``, another
platform) or disabled with ``PYBACKEND_NATIVE=0``.
"""

from __future__ import annotations

import ctypes
import os
from pathlib import Path
from typing import Optional

LIBRARY = Path(__file__).with_name("libpybackend_native.so")


def _load() -> Optional[ctypes.CDLL]:
    if os.environ.get("PYBACKEND_NATIVE", "1") == "0" or not LIBRARY.is_file():
        return None
    try:
        lib = ctypes.CDLL(str(LIBRARY))
        _declare(lib)
    except OSError:
        return None  # another platform's build, or a damaged file: the Python path works
    except AttributeError:
        return None  # a library older than this code (a checkout not rebuilt): likewise
    return lib


def _declare(lib: ctypes.CDLL) -> None:
    """The helpers' signatures; AttributeError when the library lacks one."""
    lib.pb_bytes_index.restype = ctypes.c_int64
    lib.pb_bytes_index.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
    ]
    lib.pb_bytes_pad.restype = ctypes.c_uint64
    lib.pb_bytes_pad.argtypes = [
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]
    lib.pb_bytes_pack.restype = None
    # The source is an address or a bytes object (passed as a pointer to its buffer).
    lib.pb_bytes_pack.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
        ctypes.c_uint64,
        ctypes.c_void_p,
    ]
    lib.pb_lane_spin.restype = ctypes.c_int
    lib.pb_lane_spin.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int64]


helpers: Optional[ctypes.CDLL] = _load()
