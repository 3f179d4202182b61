"""Tensors through torch, as model.py authors write it (test_torch_io.py). MODE:

protocol      torch.from_dlpack(input) (the tensor's __dlpack__), flipped by torch, answered
              with Tensor.from_dlpack(name, torch_tensor)
capsule       torch.utils.dlpack.from_dlpack(input.to_dlpack()), flipped, answered with
              Tensor.from_dlpack(name, torch.utils.dlpack.to_dlpack(torch_tensor))
numpy_bridge  torch.from_numpy(input.as_numpy()), flipped, answered with Tensor(name, .numpy())
passthrough   the input's own memory as the output: Tensor.from_dlpack(name, from_dlpack(input))
keep          answers as protocol and keeps, past the response, torch views of the inputs and
              the pb_utils.Tensor objects it answered with
kept          answers with the views the last keep kept: a finished request's inputs
kept_answers  answers with the Tensor objects the last keep answered with, a second time
add_capsule   adds 1 in place through torch.utils.dlpack.from_dlpack(input.to_dlpack()), then
              answers with a copy of a later input.as_numpy()
add_protocol  the same through torch.from_dlpack(input)
strided       Tensor.from_dlpack of torch.from_dlpack(input)[::2]          (non-contiguous:
transposed    ... of the input as 2 rows, transposed                        TEXT says whether
rows          ... of the input as rows of 2, every second row               it was taken)
column        ... of the input as one row, transposed: a column, contiguous to torch (strides
              (1, 6) for shape (6, 1): a size-1 dimension's stride says nothing)
"""

import numpy as np
import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

import triton_python_backend_utils as pb_utils


def flip(tensor):
    return torch.flip(tensor, [0])


def non_contiguous(mode, tensor):
    if mode == "strided":
        return tensor[::2]
    if mode == "transposed":
        return tensor.reshape(2, -1).T
    if mode == "column":
        return tensor.reshape(1, -1).T
    return tensor.reshape(-1, 2)[::2]  # rows


class TritonPythonModel:
    def initialize(self, args):
        self.kept = []  # (output name, torch view of an input) from the last keep
        self.answered = []  # the pb_utils.Tensor objects the last keep answered with

    def execute(self, requests):
        return [self.one(request) for request in requests]

    def one(self, request):
        mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
        if mode == "kept":
            kept = [pb_utils.Tensor.from_dlpack(name, view) for name, view in self.kept]
            return pb_utils.InferenceResponse(kept)
        if mode == "kept_answers":
            return pb_utils.InferenceResponse(self.answered)
        if mode in ("strided", "transposed", "rows", "column"):
            return self.try_non_contiguous(mode, request)
        outputs = []
        kept = []
        for tensor in request.inputs():
            if tensor.name() == "MODE":
                continue
            name = "OUT_" + tensor.name()[len("IN_") :]
            if mode in ("protocol", "keep"):
                out = pb_utils.Tensor.from_dlpack(name, flip(torch.from_dlpack(tensor)))
                if mode == "keep":
                    kept.append((name, torch.from_dlpack(tensor)))
            elif mode == "capsule":
                view = from_dlpack(tensor.to_dlpack())
                out = pb_utils.Tensor.from_dlpack(name, to_dlpack(flip(view)))
            elif mode == "numpy_bridge":
                out = pb_utils.Tensor(name, flip(torch.from_numpy(tensor.as_numpy())).numpy())
            elif mode == "passthrough":
                out = pb_utils.Tensor.from_dlpack(name, torch.from_dlpack(tensor))
            elif mode in ("add_capsule", "add_protocol"):
                view = from_dlpack(tensor.to_dlpack()) if mode == "add_capsule" else None
                view = torch.from_dlpack(tensor) if view is None else view
                view.add_(1)
                out = pb_utils.Tensor(name, np.array(tensor.as_numpy()))
            else:
                raise ValueError(f"unknown MODE {mode!r}")
            outputs.append(out)
        if mode == "keep":
            self.kept, self.answered = kept, outputs
        return pb_utils.InferenceResponse(outputs)

    def try_non_contiguous(self, mode, request):
        tensor = pb_utils.get_input_tensor_by_name(request, "IN_INT64")
        view = non_contiguous(mode, torch.from_dlpack(tensor))
        try:
            made = pb_utils.Tensor.from_dlpack("OUT_INT64", view)
        except Exception as e:  # noqa: BLE001 - the refusal is the answer
            text = f"{type(e).__name__}: {e}"
            return pb_utils.InferenceResponse([_text(text)])
        values = pb_utils.Tensor("OUT_INT64", made.as_numpy().reshape(-1).copy())
        return pb_utils.InferenceResponse([_text("taken"), values])


def _text(text):
    return pb_utils.Tensor("TEXT", np.array([text.encode()], dtype=np.object_))
