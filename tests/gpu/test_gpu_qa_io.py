"""The GPU halves of NVIDIA's qa IOTest cases (qa/L0_backend_python/io): an empty CUDA
output (test_empty_gpu_output) and one batch of requests whose CUDA outputs each have a
shape of their own (test_variable_gpu_output), through the real tritonserver on the GPU
suite's server. Their CPU halves are tests/conformance/io/test_qa_io.py; the models are in
gpu_qa_io_models.py. Copies are read from the backend's counters, as in the other files.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import pytest
from gpu_qa_io_models import VARIABLE_BATCH
from gpu_support import (
    N,
    assert_no_staging,
    copies,
    copies_since,
    infer,
    infer_at_once,
    log_tail,
    request_parts,
)

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu


def test_an_empty_cuda_output_answers_with_no_copy(grpc: Any, gpu_server: TritonServer) -> None:
    """A torch CUDA tensor of shape (0,) returned through Tensor.from_dlpack: the Tensor
    says it is on the GPU, the client gets an empty FP32 output, and the backend copies
    nothing (there are no bytes to share); N times, so nothing is left behind per request."""
    before = copies(gpu_server, "empty_gpu")
    for _ in range(N):
        got = infer(
            grpc, gpu_server, "empty_gpu", {"IN": np.ones(4, np.float32)}, ["OUT", "OUT_IS_CPU"]
        )
        assert got["OUT"].shape == (0,) and got["OUT"].dtype == np.float32, got["OUT"]
        assert got["OUT_IS_CPU"].tolist() == [False]
    assert copies_since(gpu_server, "empty_gpu", before) == {"d2d": 0, "d2h": 0, "h2d": 0}
    assert_no_staging(gpu_server)


def test_cuda_outputs_of_one_batch_keep_their_own_shapes(
    grpc: Any, gpu_server: TritonServer
) -> None:
    """VARIABLE_BATCH requests sent at once reach variable_gpu in one execute call; request
    n's answer is its own CUDA tensor of n elements, all n, copied once to the host for
    gRPC (one device-to-host copy per request and nothing else)."""
    assert grpc.is_model_ready("variable_gpu"), log_tail(gpu_server)
    sizes = range(1, VARIABLE_BATCH + 1)
    requests = [
        request_parts({"IN": np.array([[n]], np.float32)}, ["OUT", "BATCH"], {}) for n in sizes
    ]
    before = copies(gpu_server, "variable_gpu")
    results = infer_at_once(grpc, gpu_server, "variable_gpu", requests)
    answered = {}
    for n, result in zip(sizes, results):
        np.testing.assert_array_equal(
            result.as_numpy("OUT"), np.full(n, n, np.float32), err_msg=f"request {n}"
        )
        answered[n] = int(result.as_numpy("BATCH").reshape(-1)[0])
    assert answered == {n: VARIABLE_BATCH for n in range(1, VARIABLE_BATCH + 1)}, answered
    counted = copies_since(gpu_server, "variable_gpu", before)
    assert counted == {"d2d": 0, "d2h": VARIABLE_BATCH, "h2d": 0}, counted
    assert_no_staging(gpu_server)
