"""Print what the GPU check's machine offers: driver, torch, cupy, and whether CUDA IPC works
between two processes (what the backend and the stub will rely on). Never fails: each probe
reports its own error, so the report is complete on a machine without a GPU too.

Usage: python3 scripts/gpu_env_probe.py   (scripts/gpu_check.sh runs it into env.txt)
"""

from __future__ import annotations

import ctypes
import subprocess
import sys
import traceback
from typing import Callable

# The child half of the IPC probe: open the parent's handle, copy the bytes to the host.
_IPC_CHILD = """
import sys, numpy as np, cupy as cp
handle = bytes.fromhex(sys.argv[1]); n = int(sys.argv[2])
ptr = cp.cuda.runtime.ipcOpenMemHandle(handle)
host = np.empty(n, dtype=np.float32)
cp.cuda.runtime.memcpy(host.ctypes.data, ptr, host.nbytes, cp.cuda.runtime.memcpyDeviceToHost)
cp.cuda.runtime.ipcCloseMemHandle(ptr)
print(float(host.sum()))
"""


def probe(title: str, body: Callable[[], object]) -> None:
    print(f"--- {title}")
    try:
        result = body()
        if result is not None:
            print(result)
    except ImportError as exc:
        print(f"not available: {exc}")
    except Exception:  # noqa: BLE001 - a report: every failure is printed, none stops it
        traceback.print_exc(limit=3, file=sys.stdout)
    sys.stdout.flush()


def driver() -> str:
    """libcuda.so.1 through ctypes, as the backend loads it (no toolkit needed)."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        return f"not available: {exc}"
    version, count = ctypes.c_int(), ctypes.c_int()
    init = cuda.cuInit(0)
    cuda.cuDriverGetVersion(ctypes.byref(version))
    cuda.cuDeviceGetCount(ctypes.byref(count))
    return f"cuInit={init} driver CUDA version={version.value} devices={count.value}"


def torch_info() -> str:
    import torch

    lines = [f"torch {torch.__version__} (CUDA {torch.version.cuda})"]
    lines.append(f"cuda available: {torch.cuda.is_available()}")
    for i in range(torch.cuda.device_count()):
        props = torch.cuda.get_device_properties(i)
        lines.append(
            f"device {i}: {props.name}, {props.total_memory >> 20} MiB, "
            f"cc {props.major}.{props.minor}, {props.multi_processor_count} SMs"
        )
    return "\n".join(lines)


def cupy_info() -> str:
    import cupy as cp

    rt = cp.cuda.runtime
    return (
        f"cupy {cp.__version__}: runtime {rt.runtimeGetVersion()}, "
        f"driver {rt.driverGetVersion()}, devices {rt.getDeviceCount()}"
    )


def cuda_ipc() -> tuple[bool, str]:
    """Parent allocates and fills device memory, a child process opens it by IPC handle.
    Returns (worked, description); tests/gpu/test_environment.py asserts the first."""
    import cupy as cp

    n = 1 << 20
    data = cp.arange(n, dtype=cp.float32)
    handle = cp.cuda.runtime.ipcGetMemHandle(data.data.ptr)
    cp.cuda.runtime.deviceSynchronize()
    child = subprocess.run(
        [sys.executable, "-c", _IPC_CHILD, bytes(handle).hex(), str(n)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    expected = float(cp.asnumpy(data).sum())
    got = child.stdout.strip()
    ok = child.returncode == 0 and bool(got) and abs(float(got) - expected) < 1e-3 * expected
    text = f"CUDA IPC {'works' if ok else 'FAILED'}: expected {expected}, child {got!r}"
    return ok, text if ok else f"{text}\n{child.stderr[-2000:]}"


def main() -> None:
    print(f"python {sys.version.split()[0]} at {sys.executable}")
    probe("CUDA driver (libcuda.so.1)", driver)
    probe("torch", torch_info)
    probe("cupy", cupy_info)
    probe("CUDA IPC between two processes (cupy)", lambda: cuda_ipc()[1])
    for module in ("numpy", "grpc", "google.protobuf", "tritonclient", "pytest"):
        probe(f"import {module}", lambda m=module: _version(m))


def _version(module: str) -> str:
    imported = __import__(module, fromlist=["_"])
    return f"{getattr(imported, '__version__', '?')} from {getattr(imported, '__file__', '?')}"


if __name__ == "__main__":
    main()
