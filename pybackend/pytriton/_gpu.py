"""GPU tensors into and out of a bound callable (``Tensor(..., device="cuda")``).

An input declared on the GPU reaches the callable as a torch tensor (cupy array where torch
is not installed) on the instance's device: a GPU input of the request (CUDA shared memory
of the client, an ensemble's or a BLS caller's GPU tensor) is wrapped through DLPack with no
copy (the stub's CUDA IPC path, model parameter FORCE_CPU_ONLY_INPUT_TENSORS "no"); an input
that arrived in host memory (HTTP or gRPC bytes) is copied to the device once. Any output
may be a torch/cupy tensor: it goes to Triton's buffer through DLPack, device to device
when that buffer is on a GPU. numpy stays the default everywhere else."""

from __future__ import annotations

import importlib
from typing import Any, Optional, Sequence

import numpy as np

from ..utils.tensor import Tensor as PbTensor
from .exceptions import PyTritonBadParameterError

_STRINGS = (bytes, object, np.bytes_, np.object_, str, np.str_)

#: The devices a Tensor may be declared on.
DEVICES = ("cpu", "cuda")

NO_FRAMEWORK = (
    "Tensor(device='cuda') gives the callable torch tensors (or cupy arrays): install torch "
    "or cupy in the process that calls Triton.bind, or declare the tensor with device='cpu'."
)


def framework() -> Optional[str]:
    """The array library GPU inputs are given as: torch, else cupy, else None."""
    for name in ("torch", "cupy"):
        try:
            importlib.import_module(name)
        except ImportError:
            continue
        return name
    return None


def is_device_array(value: Any) -> bool:
    """A torch/cupy (any DLPack) tensor, as a callable may return instead of numpy."""
    return not isinstance(value, np.ndarray) and hasattr(value, "__dlpack__")


def dlpack_output(name: str, value: Any) -> PbTensor:
    """A callable's torch/cupy output as the stub's tensor, sharing its memory."""
    return PbTensor.from_dlpack(name, value)


def check_devices(model_name: str, inputs: Sequence[Any], outputs: Sequence[Any]) -> bool:
    """Refuse what cannot be placed on a GPU, at bind; whether the model uses a GPU."""
    on_gpu = False
    for t in list(inputs) + list(outputs):
        if t.device not in DEVICES:
            raise PyTritonBadParameterError(
                f"Tensor `{t.name}` of model `{model_name}` has device={t.device!r}; "
                f"use one of {', '.join(DEVICES)}."
            )
        if t.device == "cuda":
            on_gpu = True
            if t.dtype in _STRINGS:
                raise PyTritonBadParameterError(
                    f"Tensor `{t.name}` of model `{model_name}` holds strings, which Triton "
                    "keeps in host memory only: declare it with device='cpu'."
                )
    if any(t.device == "cuda" for t in inputs) and framework() is None:
        raise PyTritonBadParameterError(f"Model `{model_name}`: {NO_FRAMEWORK}")
    return on_gpu


class GpuInputs:
    """Turns the stub's tensors of GPU-declared inputs into framework tensors on
    ``device_id`` (the instance's device)."""

    def __init__(self, name: str, device_id: int) -> None:
        self.framework = name
        self.device_id = device_id
        self._module = importlib.import_module(name)

    def convert(self, tensor: PbTensor) -> Any:
        m = self._module
        if not tensor.is_cpu():
            # Already on a GPU (CUDA IPC from the backend): a view, no copy.
            return m.from_dlpack(tensor)
        host = tensor.as_numpy()
        if self.framework == "torch":
            return m.from_numpy(np.ascontiguousarray(host)).to(f"cuda:{self.device_id}")
        with m.cuda.Device(self.device_id):
            return m.asarray(host)
