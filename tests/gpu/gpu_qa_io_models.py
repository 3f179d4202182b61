"""Models of test_gpu_qa_io.py: the GPU halves of NVIDIA's qa IOTest cases whose CPU halves
are tests/conformance/io/test_qa_io.py (qa_empty_output, qa_variable_output).

empty_gpu     OUT = a CUDA tensor of shape (0,) through Tensor.from_dlpack (qa
    test_empty_gpu_output); OUT_IS_CPU = what that Tensor says of itself
variable_gpu  dynamic batching that waits for five requests (preferred size 5): request n
    (IN = [[n]]) gets OUT = n elements, all n, each a CUDA tensor of its own through
    Tensor.from_dlpack (qa test_variable_gpu_output); BATCH = requests in the execute call
"""

from __future__ import annotations

from gpu_io_models import FP32, model_config, torch_model

#: Requests variable_gpu waits for: one batch of outputs of five different shapes.
VARIABLE_BATCH = 5

_EMPTY_GPU = torch_model(
    header="import numpy as np\n",
    body="""
empty = torch.ones((0,), dtype=torch.float32, device=self.device)
out = pb_utils.Tensor.from_dlpack("OUT", torch.utils.dlpack.to_dlpack(empty))
is_cpu = pb_utils.Tensor("OUT_IS_CPU", np.array([out.is_cpu()], dtype=np.bool_))
responses.append(pb_utils.InferenceResponse([out, is_cpu]))
""",
)

_VARIABLE_GPU = torch_model(
    header="import numpy as np\n",
    body="""
n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0, 0])
y = torch.full((n,), float(n), dtype=torch.float32, device=self.device)
out = pb_utils.Tensor.from_dlpack("OUT", torch.utils.dlpack.to_dlpack(y))
batch = pb_utils.Tensor("BATCH", np.array([[len(requests)]], dtype=np.int32))
responses.append(pb_utils.InferenceResponse([out, batch]))
""",
)

_BOOL = '{ name: "OUT_IS_CPU", data_type: TYPE_BOOL, dims: [ 1 ] }'
_BATCH = '{ name: "BATCH", data_type: TYPE_INT32, dims: [ 1 ] }'
_ONE = '{ name: "IN", data_type: TYPE_FP32, dims: [ 1 ] }'
# A batch of exactly VARIABLE_BATCH: the delay is long enough for every request to arrive.
_WAIT_FOR_FIVE = (
    f"dynamic_batching {{ preferred_batch_size: [ {VARIABLE_BATCH} ] "
    "max_queue_delay_microseconds: 20000000 }\n"
)

#: name -> (config.pbtxt, model.py)
QA_IO_MODELS: dict[str, tuple[str, str | None]] = {
    "empty_gpu": (
        model_config("empty_gpu", [FP32.format("IN")], [FP32.format("OUT"), _BOOL]),
        _EMPTY_GPU,
    ),
    "variable_gpu": (
        model_config(
            "variable_gpu",
            [_ONE],
            [FP32.format("OUT"), _BATCH],
            max_batch_size=8,
            extra=_WAIT_FOR_FIVE,
        ),
        _VARIABLE_GPU,
    ),
}
