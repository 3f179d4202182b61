"""The CPU affinity and NUMA memory policy of an instance's thread in the process its
instances share (PYBACKEND_INSTANCE_PROCESS shared/fork).

tritonserver gives the thread that creates an instance its group's ``host_policy``
(``--host-policy=<name>,cpu-cores=<a>-<b>`` and/or ``numa-node=<n>``); the original's stub,
spawned on that thread, inherits both. The backend sends that thread's placement with each
instance (csrc/backend/placement.h) and the host gives it to the instance's thread (shared)
or child (fork), so that ``initialize``, ``execute`` and the threads they start run where
they would under ``own``."""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from typing import Any, Mapping, Optional

# set_mempolicy(2): no wrapper in the standard library, and its number depends on the machine.
_SET_MEMPOLICY = {"x86_64": 238, "aarch64": 237, "ppc64le": 261}
_WORD_BITS = 64


def apply_placement(model: str, instance: str, placement: Optional[Mapping[str, Any]]) -> None:
    """Gives the calling thread ``placement`` (``None``: leaves it as it is). A failure is
    reported on stderr (the server log) and the instance goes on where it runs."""
    if not placement:
        return
    cpus = placement.get("cpus") or []
    try:
        if cpus and set(cpus) != os.sched_getaffinity(0):
            os.sched_setaffinity(0, cpus)  # 0: the calling thread (Linux)
    except OSError as e:
        _warn(model, instance, f"CPU affinity {cpus}", e)
    mode = int(placement.get("mempolicy_mode") or 0)
    nodes = [int(w) & ((1 << _WORD_BITS) - 1) for w in placement.get("nodes") or []]
    if mode == 0 and not any(nodes):
        return  # the default policy, which every thread here already has
    number = _SET_MEMPOLICY.get(platform.machine())
    if number is None:
        _warn(model, instance, "NUMA memory policy", OSError("set_mempolicy: unknown machine"))
        return
    mask = (ctypes.c_ulong * max(1, len(nodes)))(*nodes)
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(number, mode, mask, ctypes.c_ulong(len(mask) * _WORD_BITS + 1)) != 0:
        error = ctypes.get_errno()
        _warn(model, instance, "NUMA memory policy", OSError(error, os.strerror(error)))


def _warn(model: str, instance: str, what: str, error: OSError) -> None:
    print(
        f"model '{model}', instance '{instance}': cannot take the {what} of its host_policy: "
        f"{error}",
        file=sys.stderr,
        flush=True,
    )
