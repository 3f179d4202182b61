"""Tensor corner cases model.py files hit (test_io_tensor_corners.py). MODE:

out:<case>    answers OUT built from the array OUTPUTS[case] makes (views, odd dtypes,
              zero-size and 0-d arrays, BYTES forms), or the error building it raised
case:<name>   runs CASES[name] in the model and answers RESULT "ok:<repr>" or "<Exc>:<msg>"
inputs        answers RESULT: JSON of what as_numpy() and DLPack give for each input
duplicate     answers two tensors named OUT
extra         answers OUT and NOT_IN_CONFIG (an output the configuration does not declare)

pb_utils.Tensor is looked up when a case runs: the original injects it after the import.
"""

import json

import numpy as np

import triton_python_backend_utils as pb_utils


def _readonly(array):
    array.setflags(write=False)
    return array


def _grid():
    return np.arange(6, dtype=np.float32).reshape(2, 3)


def _from_dlpack(obj):
    return pb_utils.Tensor.from_dlpack("OUT", obj)


def _mutated_after(array, value):
    """A Tensor made from `array`, then `array` changed before the response is sent."""
    tensor = pb_utils.Tensor("OUT", array)
    array[...] = value
    return tensor


def _written_through_as_numpy():
    tensor = pb_utils.Tensor("OUT", np.zeros(2, np.int32))
    tensor.as_numpy()[0] = 42
    return tensor


def _torch_mutated_after():
    import torch

    source = torch.zeros(3)
    tensor = pb_utils.Tensor.from_dlpack("OUT", source)
    source.fill_(4.0)
    return tensor


OUTPUTS = {
    "mutated_after": lambda: _mutated_after(np.zeros(3, np.float32), 7.0),
    "mutated_after_bytes": lambda: _mutated_after(np.array([b"a", b"b"], np.object_), b"z"),
    "mutated_after_transposed": lambda: _mutated_after(np.zeros((3, 2), np.int8).T, 9),
    "written_through_as_numpy": _written_through_as_numpy,
    "torch_mutated_after": _torch_mutated_after,
    "fortran": lambda: np.asfortranarray(_grid()),
    "step_slice": lambda: np.arange(10, dtype=np.int32)[::3],
    "negative_stride": lambda: np.arange(5, dtype=np.int64)[::-1],
    "column": lambda: _grid()[:, 1],
    "readonly": lambda: _readonly(np.arange(3, dtype=np.float64)),
    "broadcast": lambda: np.broadcast_to(np.arange(3, dtype=np.int16), (2, 3)),
    "zero_dim_float": lambda: np.zeros((2, 0), np.float32),
    "zero_dim_bytes": lambda: np.empty((2, 0), np.object_),
    "bool_strided": lambda: np.array([True, False, True, True, False, True])[::2],
    "bool_0d": lambda: np.array(True),
    "fp16_transposed": lambda: np.arange(6, dtype=np.float16).reshape(2, 3).T,
    "object_transposed": lambda: np.array([[b"a", b"bb"], [b"ccc", b""]], np.object_).T,
    "S_transposed": lambda: np.array([[b"a", b"bb"], [b"ccc", b""]]).T,
    "S_inner_nul": lambda: np.array([b"a\x00b", b"\x00", b"\x00\x00z"]),
    "object_nul": lambda: np.array([b"\x00", b"a\x00", b"", b"\x00\x00"], np.object_),
    "object_str": lambda: np.array(["h\u00e9llo", "", "\u2713"], np.object_),
    "object_none": lambda: np.array([None, b"x"], np.object_),
    # An 'S' array's elements are np.bytes_: the original sends them as str(x).
    "object_np_bytes": lambda: np.array(
        [np.bytes_(b"ab"), np.str_("cd"), bytearray(b"ef")], np.object_
    ),
    "object_long": lambda: np.array([b"x" * (1 << 20), b"y"], np.object_),
    "object_many": lambda: np.array([b"%d" % i for i in range(20000)], np.object_),
    "object_0d": lambda: np.array(b"solo", np.object_),
    "matrix": lambda: np.matrix([[1, 2], [3, 4]], np.int32),
    "record": lambda: np.rec.array([(1,), (2,)], dtype=[("a", "<i4")]).a,
    "intc": lambda: np.array([7, -7], np.intc),
    "longlong": lambda: np.array([7, -7], np.longlong),
    "uint": lambda: np.array([7, 8], np.uint),
    "big_endian_int": lambda: np.array([1, 256, -2], ">i4"),
    "big_endian_float": lambda: np.array([1.5, -2.0], ">f8"),
    # Tensor.from_dlpack of numpy arrays: the original's stub dies on these (test_qa_io).
    "from_dlpack_numpy_0d": lambda: _from_dlpack(np.array(4.5, np.float64)),
    "from_dlpack_numpy_bool": lambda: _from_dlpack(np.array([True, False])),
    "from_dlpack_numpy_fp16": lambda: _from_dlpack(np.array([0.5, -1.0], np.float16)),
}


def _view(array):
    tensor = pb_utils.Tensor("T", array)
    seen = tensor.as_numpy()
    flags = seen.flags
    return [tensor.shape(), seen.dtype.str, bool(flags["C_CONTIGUOUS"]), seen.tolist()]


def _same_object(array):
    return pb_utils.Tensor("T", array).as_numpy() is array


def _np_from_tensor(array):
    back = np.from_dlpack(pb_utils.Tensor("T", array))
    return [back.dtype.str, list(back.shape), back.tolist()]


def _dlpack_of_tensor_shares():
    source = pb_utils.Tensor("S", np.zeros(2, np.int32))
    made = _from_dlpack(source)
    source.as_numpy()[0] = 5
    return [made.name(), source.name(), made.as_numpy().tolist()]


def _capsule_twice():
    capsule = pb_utils.Tensor("T", np.arange(3, dtype=np.int32)).to_dlpack()
    pb_utils.Tensor.from_dlpack("A", capsule)
    return pb_utils.Tensor.from_dlpack("B", capsule).as_numpy().tolist()


def _torch_round(make):
    import torch

    made = pb_utils.Tensor.from_dlpack("T", make(torch))
    return [made.shape(), made.as_numpy().dtype.str, made.as_numpy().tolist()]


def _torch_of_tensor(array):
    import torch

    back = torch.from_dlpack(pb_utils.Tensor("T", array))
    return [str(back.dtype), list(back.shape), back.tolist()]


CASES = {
    "fortran_view": lambda: _view(np.asfortranarray(_grid())),
    "matrix_as_numpy": lambda: type(pb_utils.Tensor("T", np.matrix([[1, 2]])).as_numpy()).__name__,
    "masked_as_numpy": lambda: (
        type(pb_utils.Tensor("T", np.ma.masked_array([1.0], mask=[1])).as_numpy()).__name__
    ),
    "fortran_same_object": lambda: _same_object(np.asfortranarray(_grid())),
    "c_same_object": lambda: _same_object(_grid()),
    "readonly_same_object": lambda: _same_object(_readonly(np.arange(3.0))),
    "readonly_writeable": lambda: (
        pb_utils.Tensor("T", _readonly(np.arange(3.0))).as_numpy().flags["WRITEABLE"]
    ),
    "step_view": lambda: _view(np.arange(10, dtype=np.int32)[::3]),
    "zero_d_view": lambda: _view(np.array(5, np.int32)),
    "zero_dim_view": lambda: _view(np.zeros((2, 0), np.float32)),
    "broadcast_view": lambda: _view(np.broadcast_to(np.arange(2, dtype="u1"), (2, 2))),
    "object_str_view": lambda: _view(np.array(["a", "b\u00e9"], np.object_)),
    "S_view": lambda: _view(np.array([b"a", b"bc"])),
    "object_0d_view": lambda: _view(np.array(b"solo", np.object_)),
    "dtype_big_endian": lambda: _view(np.array([1, 2], ">i4")),
    "dtype_complex": lambda: _view(np.zeros(2, "c8")),
    "dtype_datetime": lambda: _view(np.zeros(2, "M8[s]")),
    "dtype_void": lambda: _view(np.zeros(2, "V4")),
    "dtype_longdouble": lambda: _view(np.zeros(2, np.longdouble)),
    "dlpack_fortran": lambda: _from_dlpack(np.asfortranarray(_grid())),
    "dlpack_readonly": lambda: _from_dlpack(_readonly(np.arange(3.0))),
    "dlpack_empty_name": lambda: pb_utils.Tensor.from_dlpack("", np.arange(2)),
    "dlpack_capsule_twice": _capsule_twice,
    "dlpack_of_bytes_tensor": lambda: (
        _from_dlpack(pb_utils.Tensor("S", np.array([b"a"], np.object_))).as_numpy().tolist()
    ),
    "dlpack_of_tensor_shares": _dlpack_of_tensor_shares,
    "np_from_tensor": lambda: _np_from_tensor(np.arange(3, dtype=np.int16)),
    "np_from_tensor_bool": lambda: _np_from_tensor(np.array([True, False])),
    "np_from_tensor_empty": lambda: _np_from_tensor(np.zeros((0, 2), np.float32)),
    "np_from_tensor_0d": lambda: _np_from_tensor(np.array(3, np.int64)),
    "np_from_tensor_transposed": lambda: _np_from_tensor(_grid().T),
    "np_from_tensor_bytes": lambda: _np_from_tensor(np.array([b"a"], np.object_)),
    "serialize_np_bytes": lambda: pb_utils.serialize_byte_tensor(
        np.array([np.bytes_(b"ab"), b"c"], np.object_)
    ),
    "serialize_0d": lambda: pb_utils.serialize_byte_tensor(np.array(b"solo", np.object_)),
    "serialize_S_transposed": lambda: pb_utils.serialize_byte_tensor(
        np.array([[b"a", b"bb"], [b"c", b"d"]]).T
    ),
    "serialize_numbers": lambda: pb_utils.serialize_byte_tensor(np.array([1, 2], np.int32)),
    "deserialize_empty": lambda: pb_utils.deserialize_bytes_tensor(b"").tolist(),
    "deserialize_nul": lambda: pb_utils.deserialize_bytes_tensor(
        b"\x01\x00\x00\x00\x00\x00\x00\x00\x00"
    ).tolist(),
    "to_dlpack_twice": lambda: [
        type(pb_utils.Tensor("T", np.arange(2)).to_dlpack()).__name__ for _ in range(2)
    ],
    # torch (skipped by the test where the stubs' environment lacks it)
    "torch_requires_grad": lambda: _torch_round(lambda t: t.ones(2, requires_grad=True)),
    "torch_bool": lambda: _torch_round(lambda t: t.tensor([True, False, True])),
    "torch_zero_size": lambda: _torch_round(lambda t: t.zeros(0, 3)),
    "torch_zero_size_strided": lambda: _torch_round(lambda t: t.zeros(4, 0)[::2]),
    "torch_0d": lambda: _torch_round(lambda t: t.tensor(2.5, dtype=t.float64)),
    "torch_uint16": lambda: _torch_round(lambda t: t.tensor([1, 65535], dtype=t.uint16)),
    "torch_uint64": lambda: _torch_round(lambda t: t.tensor([1, 2**63], dtype=t.uint64)),
    "torch_unsqueezed": lambda: _torch_round(lambda t: t.arange(4).reshape(2, 2)[:, None, :]),
    "torch_complex": lambda: _torch_round(lambda t: t.tensor([1j])),
    "torch_expand": lambda: _torch_round(lambda t: t.arange(3).expand(2, 3)),
    "torch_of_tensor_0d": lambda: _torch_of_tensor(np.array(3.0)),
    "torch_of_tensor_bool": lambda: _torch_of_tensor(np.array([True, False])),
    "torch_of_tensor_empty": lambda: _torch_of_tensor(np.zeros((2, 0), np.int8)),
}


# bls:<case> -> (input of identity_all, array): a BLS request made from the array.
BLS_INPUTS = {
    "fortran": ("IN_FP32", lambda: np.asfortranarray(_grid())),
    "transposed": ("IN_INT8", lambda: np.arange(6, dtype=np.int8).reshape(2, 3).T),
    "zero_dim_bytes": ("IN_STRING", lambda: np.empty((2, 0), np.object_)),
    "np_bytes": ("IN_STRING", lambda: np.array([[np.bytes_(b"ab"), b"c"]], np.object_)),
    "S_array": ("IN_STRING", lambda: np.array([[b"a\x00b", b"cd\x00"]])),
    "object_str": ("IN_STRING", lambda: np.array([["h\u00e9", 5]], np.object_)),
    "big_endian": ("IN_INT32", lambda: np.array([[1, 256]], ">i4")),
    "zero_d": ("IN_FP32_SCALAR", lambda: np.array(1.5, np.float32)),
    "wrong_rank": ("IN_FP32", lambda: np.arange(3, dtype=np.float32)),
    "wrong_dtype": ("IN_FP32", lambda: np.zeros((1, 2), np.int64)),
    "unknown_input": ("NOT_AN_INPUT", lambda: np.zeros((1, 2), np.float32)),
}


def _bls(case):
    name, make = BLS_INPUTS[case]
    request = pb_utils.InferenceRequest(
        model_name="identity_all",
        inputs=[pb_utils.Tensor(name, make())],
        requested_output_names=["OUT" + name[2:]] if name.startswith("IN_") else ["INFO"],
    )
    response = request.exec()
    if response.has_error():
        return "error:" + response.error().message()
    seen = []
    for tensor in response.output_tensors():
        array = tensor.as_numpy()
        seen.append([tensor.name(), array.dtype.str, list(array.shape), array.tolist()])
    return seen


def _outcome(call):
    try:
        return "ok:" + repr(call())
    except Exception as e:  # noqa: BLE001 - the error is the answer
        return f"{type(e).__name__}:{e}"


def _describe_inputs(request):
    seen = {}
    for tensor in request.inputs():
        if tensor.name() == "MODE":
            continue
        array = tensor.as_numpy()
        entry = {
            "shape": tensor.shape(),
            "dtype": array.dtype.str,
            "numpy_shape": list(array.shape),
            "writeable": bool(array.flags["WRITEABLE"]),
            "values": repr(array.tolist()),
        }
        if array.dtype == np.object_:
            entry["to_dlpack"] = _outcome(tensor.to_dlpack)
            entry["from_dlpack"] = _outcome(lambda t=tensor: _from_dlpack(t).as_numpy().tolist())
        else:
            entry["np_from_dlpack"] = _outcome(lambda t=tensor: np.from_dlpack(t).tolist())
            entry["from_dlpack"] = _outcome(lambda t=tensor: _from_dlpack(t).as_numpy().tolist())
        seen[tensor.name()] = entry
    return seen


def _text(value):
    return pb_utils.Tensor("RESULT", np.array([value.encode()], np.object_))


def _answer(mode, request):
    Tensor = pb_utils.Tensor
    if mode.startswith("case:"):
        return pb_utils.InferenceResponse([_text(_outcome(CASES[mode[len("case:") :]]))])
    if mode.startswith("bls:"):
        return pb_utils.InferenceResponse([_text(_outcome(lambda: _bls(mode[len("bls:") :])))])
    if mode == "inputs":
        return pb_utils.InferenceResponse([_text(json.dumps(_describe_inputs(request)))])
    if mode == "duplicate":
        first = Tensor("OUT", np.array([1.0], np.float32))
        return pb_utils.InferenceResponse([first, Tensor("OUT", np.array([2.0, 3.0], np.float32))])
    if mode == "extra":
        extra = Tensor("NOT_IN_CONFIG", np.array([1, 2], np.int32))
        return pb_utils.InferenceResponse([Tensor("OUT", np.array([1.0], np.float32)), extra])
    try:
        made = OUTPUTS[mode[len("out:") :]]()
        tensor = made if isinstance(made, Tensor) else Tensor("OUT", made)
    except Exception as e:  # noqa: BLE001 - the error is the answer
        return pb_utils.InferenceResponse(error=pb_utils.TritonError(f"{type(e).__name__}: {e}"))
    return pb_utils.InferenceResponse([tensor])


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            responses.append(_answer(mode, request))
        return responses
