"""Models of test_gpu_paths.py: GPU paths beyond one tensor in and out, served by a server of
their own (started with CUDA_VISIBLE_DEVICES set, and where stubs may stage through host
memory without failing the other files' no-staging checks).

decoupled_torch / _cupy  a decoupled model: COUNT responses to one request through the
    response sender, each OUT = IN * (i + 1) a new GPU tensor (Tensor.from_dlpack) and INDEX
    = i; torch sends from a thread after execute returned, cupy from execute
pool_view / pool_slice   FORCE_CPU_ONLY_INPUT_TENSORS "no": OUT = IN[OFFSET:] (OFFSET 0 and
    1024), a view of the GPU input returned through Tensor.from_dlpack; PTRS = IN's pointer,
    the view's, and OUT's read back through torch.from_dlpack
ensemble_pool_view / _slice  ens_produce -> pool_view / pool_slice: the view's input lies in
    Triton's own memory (the ensemble's intermediate tensor), shared without a copy
bls_starved   BLS to host_echo with preferred_memory GPU; with STARVE it first takes nearly all
    the device's free memory (cudaMalloc, so the backend's cuMemAlloc for the BLS output
    fails) and frees it when the call returns. OUT = the callee's OUT tensor passed on as it
    is, BLS_OUT_IS_CPU, LEFT = the free bytes the starvation left (-1 without it)
host_echo     KIND_CPU, OUT = IN with numpy (no CUDA in its stub)
many_allocs   ALLOCATIONS distinct cudaMalloc blocks of 2 MiB kept for the model's life; OUT =
    IN + INDEX written into block INDEX % ALLOCATIONS and returned with Tensor.from_dlpack
staging_cupy / staging_torch  OUT = 2 * IN on the GPU from memory CUDA IPC cannot export:
    cupy's stream-ordered MemoryAsyncPool, torch with expandable_segments (virtual memory)
batched_view  FORCE_CPU_ONLY_INPUT_TENSORS "no", dynamic batching (up to 8, 200 ms): OUT = a view
    of IN, IN_IS_CPU, BATCH = how many requests the execute call got
isolated_gpu  ISOLATE_GPU "yes" (gpu_io_models.py); isolated_view: torch_view_no isolated
"""

from __future__ import annotations

from gpu_io_models import (
    FP32,
    MODELS,
    PRODUCE,
    VIEW_TORCH,
    model_config,
    pbtxt_list,
    view_config,
)

#: Distinct allocations many_allocs returns from: past the backend's 64 mappings per stub.
ALLOCATIONS = 80
#: FP32 elements of one many_allocs block (2 MiB: a whole page, an allocation of its own).
BLOCK_ELEMENTS = 1 << 19
#: OFFSET (elements) of the pool view models.
OFFSETS = {"pool_view": 0, "pool_slice": 1024}

_IN = [FP32.format("IN")]
_OUT = [FP32.format("OUT")]


def _typed(name: str, data_type: str, dims: int) -> str:
    return f'{{ name: "{name}", data_type: {data_type}, dims: [ {dims} ] }}'


_DECOUPLED_TORCH = """
import threading

import numpy as np
import torch
import torch.utils.dlpack
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.device = torch.device("cuda", int(args["model_instance_device_id"]))
        self.threads = []

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            sender = request.get_response_sender()
            thread = threading.Thread(target=self.send, args=(sender, x, count))
            thread.start()
            self.threads.append(thread)
        return None

    def send(self, sender, x, count):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        try:
            with torch.cuda.device(self.device):
                base = torch.from_numpy(x).to(self.device)
                for i in range(count):
                    out = pb_utils.Tensor.from_dlpack(
                        "OUT", torch.utils.dlpack.to_dlpack(base * (i + 1))
                    )
                    index = pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))
                    flags = final if i == count - 1 else 0
                    sender.send(pb_utils.InferenceResponse([out, index]), flags=flags)
        except Exception as e:  # the client must see it, not wait for a final response
            error = pb_utils.TritonError(repr(e))
            sender.send(pb_utils.InferenceResponse(error=error), flags=final)

    def finalize(self):
        for thread in self.threads:
            thread.join(timeout=30)
"""

_DECOUPLED_CUPY = """
import cupy as cp
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.device = cp.cuda.Device(int(args["model_instance_device_id"]))

    def execute(self, requests):
        final = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
        with self.device:
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
                sender = request.get_response_sender()
                base = cp.asarray(x)
                for i in range(count):
                    out = pb_utils.Tensor.from_dlpack("OUT", base * (i + 1))
                    index = pb_utils.Tensor("INDEX", np.array([i], dtype=np.int32))
                    flags = final if i == count - 1 else 0
                    sender.send(pb_utils.InferenceResponse([out, index]), flags=flags)
        return None
"""

_POOL_VIEW = """
import json

import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"])["parameters"]
        self.offset = int(parameters["OFFSET"]["string_value"])

    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            if tensor.is_cpu():
                raise pb_utils.TritonModelException("IN arrived on the CPU, expected the GPU")
            x = torch.from_dlpack(tensor)
            view = x[self.offset:]  # contiguous: the same memory from OFFSET on
            out = pb_utils.Tensor.from_dlpack("OUT", view)
            ptrs = [x.data_ptr(), view.data_ptr(), torch.from_dlpack(out).data_ptr()]
            responses.append(pb_utils.InferenceResponse([
                out, pb_utils.Tensor("PTRS", np.array(ptrs, dtype=np.int64)),
            ]))
        return responses
"""

_BLS_STARVED = """
import cupy as cp
import numpy as np
import triton_python_backend_utils as pb_utils

MiB = 1 << 20


def starve(device):
    \"\"\"Takes nearly all of the device's free memory with cudaMalloc (not cupy's pool, so
    dropping the blocks frees them at once). Returns the blocks and the free bytes left.\"\"\"
    blocks = []
    with cp.cuda.Device(device):
        free, _ = cp.cuda.runtime.memGetInfo()
        size = free - 256 * MiB
        while size > 0 and not blocks:
            try:
                blocks.append(cp.cuda.Memory(size))
            except Exception:
                size -= 1024 * MiB
        for _ in range(8192):  # then the rest, 2 MiB at a time
            try:
                blocks.append(cp.cuda.Memory(2 * MiB))
            except Exception:
                break
        left, _ = cp.cuda.runtime.memGetInfo()
    return blocks, int(left)


class TritonPythonModel:
    def initialize(self, args):
        self.device_id = int(args["model_instance_device_id"])

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().copy()
            starved = bool(pb_utils.get_input_tensor_by_name(request, "STARVE").as_numpy()[0])
            blocks, left = starve(self.device_id) if starved else ([], -1)
            try:
                reply = pb_utils.InferenceRequest(
                    model_name="host_echo",
                    inputs=[pb_utils.Tensor("IN", x)],
                    requested_output_names=["OUT"],
                    preferred_memory=pb_utils.PreferredMemory(
                        pb_utils.TRITONSERVER_MEMORY_GPU, self.device_id
                    ),
                ).exec()
            finally:
                blocks.clear()  # cudaFree: the device is the server's again
            if reply.has_error():
                raise pb_utils.TritonModelException(reply.error().message())
            # Passed on as it is: host memory, or GPU memory the backend lent for it.
            got = pb_utils.get_output_tensor_by_name(reply, "OUT")
            responses.append(pb_utils.InferenceResponse([
                got,
                pb_utils.Tensor("BLS_OUT_IS_CPU", np.array([got.is_cpu()], dtype=np.bool_)),
                pb_utils.Tensor("LEFT", np.array([left], dtype=np.int64)),
            ]))
        return responses
"""

_HOST_ECHO = """
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy().copy())
            ])
            for r in requests
        ]
"""

_MANY_ALLOCS = f"""
import cupy as cp
import triton_python_backend_utils as pb_utils

ALLOCATIONS = {ALLOCATIONS}
ELEMENTS = {BLOCK_ELEMENTS}


class TritonPythonModel:
    def initialize(self, args):
        self.device = cp.cuda.Device(int(args["model_instance_device_id"]))
        with self.device:
            # cudaMalloc each (not cupy's pool): every block is an allocation of its own, with
            # its own CUDA IPC handle, alive as long as the model.
            memories = [cp.cuda.Memory(ELEMENTS * 4) for _ in range(ALLOCATIONS)]
            self.blocks = [
                cp.ndarray((ELEMENTS,), cp.float32, cp.cuda.MemoryPointer(m, 0)) for m in memories
            ]

    def execute(self, requests):
        responses = []
        with self.device:
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                index = int(pb_utils.get_input_tensor_by_name(request, "INDEX").as_numpy()[0])
                block = self.blocks[index % ALLOCATIONS]
                block[...] = cp.asarray(x) + index
                out = pb_utils.Tensor.from_dlpack("OUT", block)
                responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

_STAGING_CUPY = """
import cupy as cp
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        self.device = cp.cuda.Device(int(args["model_instance_device_id"]))
        with self.device:
            self.pool = cp.cuda.MemoryAsyncPool()  # cudaMallocAsync: stream-ordered memory

    def execute(self, requests):
        responses = []
        with self.device, cp.cuda.using_allocator(self.pool.malloc):
            for request in requests:
                x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
                out = pb_utils.Tensor.from_dlpack("OUT", cp.asarray(x) * 2)
                responses.append(pb_utils.InferenceResponse([out]))
        return responses
"""

# PRODUCE (OUT = 2 * IN) with torch's allocator on segments of virtual memory (cuMemMap),
# which CUDA IPC cannot export: set before torch starts its allocator.
_STAGING_TORCH = (
    'import os\n\nos.environ["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"\n' + PRODUCE
)

_BATCHED_VIEW = """
import numpy as np
import torch
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "IN")
            out = pb_utils.Tensor.from_dlpack("OUT", torch.from_dlpack(tensor))  # a view
            responses.append(pb_utils.InferenceResponse([
                out,
                pb_utils.Tensor("IN_IS_CPU", np.array([[tensor.is_cpu()]], dtype=np.bool_)),
                pb_utils.Tensor("BATCH", np.array([[len(requests)]], dtype=np.int32)),
            ]))
        return responses
"""

_NO_CPU_INPUTS = {"FORCE_CPU_ONLY_INPUT_TENSORS": "no"}


def _ensemble(name: str, consumer: str) -> str:
    """ens_produce -> consumer (a pool view model), OUT and PTRS out."""
    return (
        f'name: "{name}"\nplatform: "ensemble"\nmax_batch_size: 0\n'
        f"input {pbtxt_list(_IN)}\n"
        f"output {pbtxt_list(_OUT + [_typed('PTRS', 'TYPE_INT64', 3)])}\n"
        "ensemble_scheduling { step [\n"
        '  { model_name: "ens_produce" model_version: -1\n'
        '    input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "mid" } },\n'
        f'  {{ model_name: "{consumer}" model_version: -1\n'
        '    input_map { key: "IN" value: "mid" }\n'
        '    output_map [ { key: "OUT" value: "OUT" }, { key: "PTRS" value: "PTRS" } ] }\n'
        "] }\n"
    )


def _pool_view(name: str) -> tuple[str, str]:
    outputs = _OUT + [_typed("PTRS", "TYPE_INT64", 3)]
    config = model_config(name, _IN, outputs, OFFSET=str(OFFSETS[name]), **_NO_CPU_INPUTS)
    return config, _POOL_VIEW


_DECOUPLED_IO = (
    _IN + [_typed("COUNT", "TYPE_INT32", 1)],
    _OUT + [_typed("INDEX", "TYPE_INT32", 1)],
)
_DECOUPLED = "model_transaction_policy { decoupled: true }\n"

#: name -> (config.pbtxt, model.py or None for an ensemble)
PATH_MODELS: dict[str, tuple[str, str | None]] = {
    "decoupled_torch": (
        model_config("decoupled_torch", *_DECOUPLED_IO, extra=_DECOUPLED),
        _DECOUPLED_TORCH,
    ),
    "decoupled_cupy": (
        model_config("decoupled_cupy", *_DECOUPLED_IO, extra=_DECOUPLED),
        _DECOUPLED_CUPY,
    ),
    "ens_produce": (model_config("ens_produce", _IN, _OUT), PRODUCE),
    "pool_view": _pool_view("pool_view"),
    "pool_slice": _pool_view("pool_slice"),
    "ensemble_pool_view": (_ensemble("ensemble_pool_view", "pool_view"), None),
    "ensemble_pool_slice": (_ensemble("ensemble_pool_slice", "pool_slice"), None),
    "bls_starved": (
        model_config(
            "bls_starved",
            _IN + [_typed("STARVE", "TYPE_BOOL", 1)],
            _OUT + [_typed("BLS_OUT_IS_CPU", "TYPE_BOOL", 1), _typed("LEFT", "TYPE_INT64", 1)],
        ),
        _BLS_STARVED,
    ),
    "host_echo": (model_config("host_echo", _IN, _OUT, kind="KIND_CPU"), _HOST_ECHO),
    "many_allocs": (
        model_config("many_allocs", _IN + [_typed("INDEX", "TYPE_INT32", 1)], _OUT),
        _MANY_ALLOCS,
    ),
    "staging_cupy": (model_config("staging_cupy", _IN, _OUT), _STAGING_CUPY),
    "staging_torch": (model_config("staging_torch", _IN, _OUT), _STAGING_TORCH),
    "batched_view": (
        model_config(
            "batched_view",
            _IN,
            _OUT + [_typed("IN_IS_CPU", "TYPE_BOOL", 1), _typed("BATCH", "TYPE_INT32", 1)],
            max_batch_size=8,
            extra="dynamic_batching { max_queue_delay_microseconds: 200000 }\n",
            **_NO_CPU_INPUTS,
        ),
        _BATCHED_VIEW,
    ),
    "isolated_gpu": MODELS["isolated_gpu"],
    "isolated_view": (view_config("isolated_view", "no", "view", ISOLATE_GPU="yes"), VIEW_TORCH),
}
