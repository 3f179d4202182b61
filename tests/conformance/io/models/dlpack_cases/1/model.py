import ctypes

import numpy as np

import triton_python_backend_utils as pb_utils


class _Capsule:
    """A DLPack capsule as numpy.from_dlpack takes it (what torch.from_dlpack does with it)."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, stream=None):
        return self.capsule

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", _DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", _DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [
        ("dl_tensor", _DLTensor),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", ctypes.c_void_p),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _EverySecond:
    """A DLPack producer, as torch is, of a non-contiguous CPU tensor: every second INT64
    of `base` (shape [n/2], stride 2 elements). Made by hand so that the case runs where
    torch is not installed (torch_interop has it with torch); `base` stays alive with this
    object."""

    def __init__(self, base):
        self.base = np.ascontiguousarray(base, np.int64)
        self.shape = (ctypes.c_int64 * 1)(self.base.size // 2)
        self.strides = (ctypes.c_int64 * 1)(2)
        tensor = _DLTensor(
            data=self.base.ctypes.data,
            device=_DLDevice(1, 0),  # kDLCPU
            ndim=1,
            dtype=_DLDataType(0, 64, 1),  # kDLInt, 64 bits
            shape=self.shape,
            strides=self.strides,
            byte_offset=0,
        )
        # A no-op deleter (the memory is `base`'s); consumers call it once they are done.
        self.deleter = _DELETER(lambda managed: None)
        deleter = ctypes.cast(self.deleter, ctypes.c_void_p)
        self.managed = _DLManagedTensor(dl_tensor=tensor, manager_ctx=None, deleter=deleter)

    def __dlpack__(self, stream=None):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype = ctypes.py_object
        new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return (1, 0)


class TritonPythonModel:
    """MODE "write_through_dlpack": writes 99 into the input's first element through the
    memory that `to_dlpack()` exports (as an in-place torch op on `from_dlpack(...)` does),
    then answers with a later `as_numpy()` of the same input.
    MODE "strided": answers with `Tensor.from_dlpack` of a non-contiguous DLPack tensor
    (every second element of the input), or with the error it raised."""

    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT")
            if mode == "write_through_dlpack":
                view = np.from_dlpack(_Capsule(tensor.to_dlpack()))
                ctypes.c_int64.from_address(view.__array_interface__["data"][0]).value = 99
                out = pb_utils.Tensor("OUT", np.array(tensor.as_numpy()))
                responses.append(pb_utils.InferenceResponse([out]))
            else:
                strided = _EverySecond(tensor.as_numpy())
                try:
                    made = pb_utils.Tensor.from_dlpack("OUT", strided)
                except Exception as e:  # noqa: BLE001 - the error is the answer
                    error = pb_utils.TritonError(f"{type(e).__name__}: {e}")
                    responses.append(pb_utils.InferenceResponse(error=error))
                    continue
                out = pb_utils.Tensor("OUT", np.array(made.as_numpy()))
                responses.append(pb_utils.InferenceResponse([out]))
        return responses
