"""The CPU checks of NVIDIA's qa/python_models/dlpack_test, as a model.py written with torch
does them: torch tensors of every DLPack type into pb_utils.Tensor (as a capsule and through
__dlpack__) and back, numpy as a DLPack consumer, the device, and the texts of the two
refusals. Each check's outcome goes into the report; the test wants every one "ok"."""

import json

import numpy as np
import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

import triton_python_backend_utils as pb_utils

DTYPES = {
    "float16": torch.float16,
    "float32": torch.float32,
    "float64": torch.float64,
    "int8": torch.int8,
    "int16": torch.int16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
NOT_CONTIGUOUS = (
    "DLPack tensor is not contiguous. Only contiguous DLPack tensors that are stored in "
    "C-Order are supported."
)


def same(pb_tensor, reference):
    """pb_tensor holds exactly `reference`: values, dtype (through numpy), shape, name."""
    array = pb_tensor.as_numpy()
    assert array.dtype == reference.numpy().dtype, (array.dtype, reference.dtype)
    assert np.array_equal(array, reference.numpy()), (array, reference)
    assert pb_tensor.shape() == list(reference.shape), pb_tensor.shape()
    assert pb_tensor.is_cpu()


def back_in_torch(made, reference):
    assert made.dtype == reference.dtype, (made.dtype, reference.dtype)
    assert made.type() == reference.type(), (made.type(), reference.type())
    assert torch.equal(made, reference), (made, reference)


def dtype_checks(name, dtype):
    if dtype == torch.bool:
        source = torch.arange(100) % 3 == 0
    else:
        source = (torch.arange(100) % 7).to(dtype)

    def capsule():
        pb_tensor = pb_utils.Tensor.from_dlpack("test_tensor", to_dlpack(source))
        assert pb_tensor.name() == "test_tensor"
        same(pb_tensor, source)
        back_in_torch(from_dlpack(pb_tensor.to_dlpack()), source)

    def protocol():
        pb_tensor = pb_utils.Tensor.from_dlpack("test_tensor", source)
        same(pb_tensor, source)
        back_in_torch(torch.from_dlpack(pb_tensor), source)
        back_in_torch(from_dlpack(pb_tensor), source)

    def numpy_consumer():
        pb_tensor = pb_utils.Tensor.from_dlpack("tensor", source)
        assert np.array_equal(np.from_dlpack(pb_tensor), source.numpy())
        assert pb_tensor.__dlpack_device__() == source.__dlpack_device__()
        assert tuple(pb_tensor.__dlpack_device__()) == (1, 0)

    def numpy_made():
        # A tensor made from numpy, read by torch (the other direction).
        array = source.numpy().copy()
        back_in_torch(torch.from_dlpack(pb_utils.Tensor("tensor", array)), source)

    return {
        f"{name}/capsule": capsule,
        f"{name}/__dlpack__": protocol,
        f"{name}/numpy_consumer": numpy_consumer,
        f"{name}/numpy_made": numpy_made,
    }


def bfloat16():
    source = torch.arange(16, dtype=torch.float32).to(torch.bfloat16)
    pb_tensor = pb_utils.Tensor.from_dlpack("bf16", source)
    back_in_torch(torch.from_dlpack(pb_tensor), source)
    back_in_torch(from_dlpack(pb_tensor.to_dlpack()), source)


def non_contiguous_error():
    transposed = torch.transpose(torch.rand([20, 30], dtype=torch.float16), 0, 1)
    for given in (to_dlpack(transposed), transposed):
        try:
            pb_utils.Tensor.from_dlpack("test_tensor", given)
        except Exception as e:  # noqa: BLE001 - the text is the check
            assert str(e) == NOT_CONTIGUOUS, str(e)
        else:
            raise AssertionError("a transposed tensor was taken")


def string_tensor_error():
    pb_tensor = pb_utils.Tensor("test_tensor", np.array(["An Example String"], dtype=np.object_))
    try:
        pb_tensor.to_dlpack()
    except Exception as e:  # noqa: BLE001 - the text is the check
        assert str(e) == "DLPack does not have support for string tensors.", str(e)
    else:
        raise AssertionError("to_dlpack of a string tensor worked")


def checks():
    found = {}
    for name, dtype in DTYPES.items():
        found.update(dtype_checks(name, dtype))
    found["bfloat16"] = bfloat16
    found["non_contiguous_error"] = non_contiguous_error
    found["string_tensor_error"] = string_tensor_error
    return found


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            report = {}
            for name, check in checks().items():
                try:
                    check()
                    report[name] = "ok"
                except Exception as e:  # noqa: BLE001 - every outcome is reported
                    report[name] = f"{type(e).__name__}: {e}"
            text = np.array([json.dumps(report)], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("REPORT", text)]))
        return responses
