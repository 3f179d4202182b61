"""Models of the GPU suite that take GPU inputs, hand GPU tensors on and report what they saw.

Every model reports where its input arrived and the device pointers it saw, so a test proves
placement and zero copies from inside the stub, not from the model's say-so:

torch_view_no / _yes / _default   OUT = a view of IN (the same memory, no copy) with
    FORCE_CPU_ONLY_INPUT_TENSORS "no", "yes" and unset. IN_IS_CPU and OUT_IS_CPU say where
    the tensors are; DEVICE is IN's __dlpack_device__ and the stub's current CUDA device;
    PTRS are IN's pointer through torch.from_dlpack, again through a second from_dlpack, the
    pointer of the tensor given to Tensor.from_dlpack, and OUT's pointer read back through
    torch.from_dlpack (all 0 when IN is on the CPU); AS_NUMPY_ERROR is what IN.as_numpy()
    raised ("" when it worked).
torch_copy_no     the same, but OUT is a new GPU tensor (IN * 1): the pipelines use it, so
    they need no more of pybackend than a GPU output of the stub's own memory
cupy_view_no      torch_view_no through cupy
ens_produce       OUT = 2 * IN, a new torch CUDA tensor returned with Tensor.from_dlpack
ensemble_gpu      ens_produce -> torch_copy_no: a GPU tensor passed between two python models
ensemble_gpu_cpu  ens_produce -> torch_view_yes: the same tensor, forced onto the CPU
bls_gpu           BLS to torch_copy_no with a GPU input tensor and preferred_memory GPU (or
    CPU, input PREFER_GPU); returns OUT = the callee's OUT, BLS_OUT_IS_CPU, BLS_OUT_DEVICE
    and the callee's IN_IS_CPU
gpu_hold          OUT = 2 * IN on the GPU; with HOLD > 0 it writes holding-<pid> into its
    repository and sleeps HOLD seconds while holding its GPU input and output (to be killed)
torch_side_stream OUT = 2 * IN + 1 computed on a side CUDA stream after a ~25 ms spin of the
    GPU there, returned with Tensor.from_dlpack inside that stream's context: pybackend must
    order its read after the producer's stream (DLPack's __dlpack__(stream=...))
isolated_gpu      ISOLATE_GPU "yes": OUT = 2 * IN on the GPU; VISIBLE is the stub's
    CUDA_VISIBLE_DEVICES, DEVICES torch's device count and current device there
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

FP32 = '{{ name: "{}", data_type: TYPE_FP32, dims: [ -1 ] }}'
_VIEW_OUTPUTS = [
    FP32.format("OUT"),
    '{ name: "IN_IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] }',
    '{ name: "OUT_IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] }',
    '{ name: "DEVICE", data_type: TYPE_INT32, dims: [ 3 ] }',
    '{ name: "PTRS", data_type: TYPE_INT64, dims: [ 4 ] }',
    '{ name: "AS_NUMPY_ERROR", data_type: TYPE_STRING, dims: [ 1 ] }',
]
#: The names a view model (and the ensembles ending in one) return.
VIEW_OUTPUT_NAMES = ["OUT", "IN_IS_CPU", "OUT_IS_CPU", "DEVICE", "PTRS", "AS_NUMPY_ERROR"]


def pbtxt_list(items: list[str]) -> str:
    return "[\n  " + ",\n  ".join(items) + "\n]"


def model_config(
    name: str,
    inputs: list[str],
    outputs: list[str],
    *,
    kind: str = "KIND_GPU",
    max_batch_size: int = 0,
    extra: str = "",
    **parameters: str,
) -> str:
    """A python model's config.pbtxt (one instance of ``kind``), with string ``parameters``
    and ``extra`` text (e.g. a transaction policy)."""
    return (
        f'name: "{name}"\nbackend: "python"\nmax_batch_size: {max_batch_size}\n'
        f"input {pbtxt_list(inputs)}\noutput {pbtxt_list(outputs)}\n"
        f"instance_group [ {{ kind: {kind}, count: 1 }} ]\n{extra}"
        + "".join(
            f'parameters: {{ key: "{key}" value: {{ string_value: "{value}" }} }}\n'
            for key, value in parameters.items()
        )
    )


# One source for both frameworks: FW is torch or cupy, and the three functions below say how
# each imports a tensor, reads its pointer and makes the current device.
_VIEW = """
import json

import numpy as np
import triton_python_backend_utils as pb_utils
{framework}


def flag(name, value):
    return pb_utils.Tensor(name, np.array([value], dtype=np.bool_))


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {{}})
        self.view = parameters.get("OUTPUT", {{}}).get("string_value") == "view"

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            as_numpy_error = ""
            if tensor.is_cpu():
                out = pb_utils.Tensor("OUT", tensor.as_numpy().copy())
                ptrs = [0, 0, 0, 0]
            else:
                try:
                    tensor.as_numpy()
                except pb_utils.TritonModelException as e:
                    as_numpy_error = str(e)
                x = import_tensor(tensor)
                again = import_tensor(tensor)
                source = x.reshape(-1) if self.view else x * 1  # a view (no copy), or new
                out = pb_utils.Tensor.from_dlpack("OUT", source)
                ptrs = [pointer(x), pointer(again), pointer(source), pointer(import_tensor(out))]
            device = [int(d) for d in tensor.__dlpack_device__()] + [current_device()]
            responses.append(pb_utils.InferenceResponse([
                out,
                flag("IN_IS_CPU", tensor.is_cpu()),
                flag("OUT_IS_CPU", out.is_cpu()),
                pb_utils.Tensor("DEVICE", np.array(device, dtype=np.int32)),
                pb_utils.Tensor("PTRS", np.array(ptrs, dtype=np.int64)),
                pb_utils.Tensor("AS_NUMPY_ERROR", np.array([as_numpy_error], dtype=object)),
            ]))
        return responses
"""

_TORCH = """import torch


def import_tensor(t):
    return torch.from_dlpack(t)


def pointer(x):
    return x.data_ptr()


def current_device():
    return torch.cuda.current_device()
"""

_CUPY = """import cupy as cp


def import_tensor(t):
    return cp.from_dlpack(t)


def pointer(x):
    return x.data.ptr


def current_device():
    return cp.cuda.runtime.getDevice()
"""

#: A KIND_GPU torch model on its instance's device: ``header`` follows the imports; ``body``
#: runs per request (``request``) and appends to ``responses``. The GPU tests' models and
#: benchmarks/gpu_identity.py share it.
_TORCH_MODEL = """
import torch
import torch.utils.dlpack
import triton_python_backend_utils as pb_utils
{header}

class TritonPythonModel:
    def initialize(self, args):
        self.device = torch.device("cuda", int(args["model_instance_device_id"]))

    def execute(self, requests):
        responses = []
        for request in requests:
{body}
        return responses
"""


def torch_model(body: str, header: str = "") -> str:
    """model.py of _TORCH_MODEL with ``body`` (unindented lines) and ``header``."""
    return _TORCH_MODEL.format(header=header, body=textwrap.indent(body.strip("\n"), " " * 12))


PRODUCE = torch_model("""
x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
y = torch.from_numpy(x.copy()).to(self.device) * 2
out = pb_utils.Tensor.from_dlpack("OUT", torch.utils.dlpack.to_dlpack(y))
responses.append(pb_utils.InferenceResponse([out]))
""")

_BLS = """
import numpy as np
import torch
import triton_python_backend_utils as pb_utils


def host(tensor):
    # With preferred_memory GPU every output of the callee comes back on the GPU.
    if tensor.is_cpu():
        return tensor.as_numpy().copy()
    return torch.from_dlpack(tensor).cpu().numpy()


class TritonPythonModel:
    def initialize(self, args):
        self.device_id = int(args["model_instance_device_id"])
        self.device = torch.device("cuda", self.device_id)

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            gpu = bool(pb_utils.get_input_tensor_by_name(request, "PREFER_GPU").as_numpy()[0])
            memory = pb_utils.TRITONSERVER_MEMORY_GPU if gpu else pb_utils.TRITONSERVER_MEMORY_CPU
            on_gpu = torch.from_numpy(x.copy()).to(self.device)
            reply = pb_utils.InferenceRequest(
                model_name="torch_copy_no",
                inputs=[pb_utils.Tensor.from_dlpack("IN", on_gpu)],
                requested_output_names=["OUT", "IN_IS_CPU"],
                preferred_memory=pb_utils.PreferredMemory(memory, self.device_id),
            ).exec()
            if reply.has_error():
                raise pb_utils.TritonModelException(reply.error().message())
            got = pb_utils.get_output_tensor_by_name(reply, "OUT")
            if got.is_cpu():
                out = pb_utils.Tensor("OUT", got.as_numpy().copy())
            else:
                # A new tensor of ours: the BLS output goes back when `got` is dropped.
                out = pb_utils.Tensor.from_dlpack("OUT", torch.from_dlpack(got) * 1)
            callee_in = host(pb_utils.get_output_tensor_by_name(reply, "IN_IS_CPU"))
            device = [int(d) for d in got.__dlpack_device__()]
            responses.append(pb_utils.InferenceResponse([
                out,
                pb_utils.Tensor("BLS_OUT_IS_CPU", np.array([got.is_cpu()], dtype=np.bool_)),
                pb_utils.Tensor("BLS_OUT_DEVICE", np.array(device, dtype=np.int32)),
                pb_utils.Tensor("CALLEE_IN_IS_CPU", callee_in),
            ]))
        return responses
"""

_HOLD = """
import os
import time

import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.repository = args["model_repository"]

    def execute(self, requests):
        responses = []
        for request in requests:
            x = torch.from_dlpack(pb_utils.get_input_tensor_by_name(request, "IN"))
            hold = int(pb_utils.get_input_tensor_by_name(request, "HOLD").as_numpy()[0])
            out = pb_utils.Tensor.from_dlpack("OUT", x * 2)
            if hold > 0:
                # The input's and the output's device memory are held here until killed.
                marker = os.path.join(self.repository, f"holding-{os.getpid()}")
                open(marker, "w").close()
                time.sleep(min(hold, 120))
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""


def view_config(name: str, force_cpu: str | None, output: str, **parameters: str) -> str:
    """A view model's config: FORCE_CPU_ONLY_INPUT_TENSORS (None: unset), OUTPUT and any
    other ``parameters``."""
    forced = {} if force_cpu is None else {"FORCE_CPU_ONLY_INPUT_TENSORS": force_cpu}
    return model_config(
        name, [FP32.format("IN")], _VIEW_OUTPUTS, OUTPUT=output, **forced, **parameters
    )


def _ensemble(name: str, consumer: str) -> str:
    outputs = ", ".join(f'{{ key: "{n}" value: "{n}" }}' for n in VIEW_OUTPUT_NAMES)
    return (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        f"input {pbtxt_list([FP32.format('IN')])}\noutput {pbtxt_list(_VIEW_OUTPUTS)}\n"
        "ensemble_scheduling { step [\n"
        '  { model_name: "ens_produce" model_version: -1\n'
        '    input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "mid" } },\n'
        f'  {{ model_name: "{consumer}" model_version: -1\n'
        f'    input_map {{ key: "IN" value: "mid" }} output_map [ {outputs} ] }}\n'
        "] }\n"
    )


_ISOLATED = """
import os

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            y = torch.from_numpy(x.copy()).to(torch.device("cuda", 0)) * 2
            visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(unset)")
            devices = [torch.cuda.device_count(), torch.cuda.current_device()]
            responses.append(pb_utils.InferenceResponse([
                pb_utils.Tensor.from_dlpack("OUT", y),
                pb_utils.Tensor("VISIBLE", np.array([visible], dtype=object)),
                pb_utils.Tensor("DEVICES", np.array(devices, dtype=np.int32)),
            ]))
        return responses
"""

_SIDE_STREAM = """
import torch
import triton_python_backend_utils as pb_utils

SPIN_CYCLES = 50_000_000  # ~25 ms at H100 clocks: far longer than a copy takes


class TritonPythonModel:
    def initialize(self, args):
        self.device = torch.device("cuda", int(args["model_instance_device_id"]))
        self.side = torch.cuda.Stream(device=self.device)

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            on_gpu = torch.from_numpy(x.copy()).to(self.device)
            self.side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(self.side):
                torch.cuda._sleep(SPIN_CYCLES)  # OUT is written only after this
                out = pb_utils.Tensor.from_dlpack("OUT", on_gpu * 2 + 1)
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

_IN = [FP32.format("IN")]
VIEW_TORCH = _VIEW.format(framework=_TORCH)

#: name -> (config.pbtxt, model.py or None for an ensemble)
MODELS: dict[str, tuple[str, str | None]] = {
    "torch_view_no": (view_config("torch_view_no", "no", "view"), VIEW_TORCH),
    "torch_copy_no": (view_config("torch_copy_no", "no", "copy"), VIEW_TORCH),
    "torch_view_yes": (view_config("torch_view_yes", "yes", "view"), VIEW_TORCH),
    "torch_view_default": (view_config("torch_view_default", None, "view"), VIEW_TORCH),
    "cupy_view_no": (view_config("cupy_view_no", "no", "view"), _VIEW.format(framework=_CUPY)),
    "ens_produce": (model_config("ens_produce", _IN, [FP32.format("OUT")]), PRODUCE),
    "ensemble_gpu": (_ensemble("ensemble_gpu", "torch_copy_no"), None),
    "ensemble_gpu_cpu": (_ensemble("ensemble_gpu_cpu", "torch_view_yes"), None),
    "bls_gpu": (
        model_config(
            "bls_gpu",
            _IN + ['{ name: "PREFER_GPU", data_type: TYPE_BOOL, dims: [ 1 ] }'],
            [
                FP32.format("OUT"),
                '{ name: "BLS_OUT_IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] }',
                '{ name: "BLS_OUT_DEVICE", data_type: TYPE_INT32, dims: [ 2 ] }',
                '{ name: "CALLEE_IN_IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] }',
            ],
        ),
        _BLS,
    ),
    "gpu_hold": (
        model_config(
            "gpu_hold",
            _IN + ['{ name: "HOLD", data_type: TYPE_INT32, dims: [ 1 ] }'],
            [FP32.format("OUT")],
            FORCE_CPU_ONLY_INPUT_TENSORS="no",
        ),
        _HOLD,
    ),
    "torch_side_stream": (
        model_config("torch_side_stream", _IN, [FP32.format("OUT")]),
        _SIDE_STREAM,
    ),
    "isolated_gpu": (
        model_config(
            "isolated_gpu",
            _IN,
            [
                FP32.format("OUT"),
                '{ name: "VISIBLE", data_type: TYPE_STRING, dims: [ 1 ] }',
                '{ name: "DEVICES", data_type: TYPE_INT32, dims: [ 2 ] }',
            ],
            ISOLATE_GPU="yes",
        ),
        _ISOLATED,
    ),
}


def write_io_models(root: Path, models: Mapping[str, tuple[str, str | None]] = MODELS) -> Path:
    """Writes every model of ``models`` (name -> (config.pbtxt, model.py or None for an
    ensemble)) under ``root``; returns it."""
    for name, (config, source) in models.items():
        (root / name / "1").mkdir(parents=True)
        (root / name / "config.pbtxt").write_text(config)
        if source is not None:
            (root / name / "1" / "model.py").write_text(source)
    return root
