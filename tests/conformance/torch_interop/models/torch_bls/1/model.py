"""BLS outputs into torch. MODE:

protocol   the BLS input made by Tensor.from_dlpack("INPUT", torch_tensor), the output read
           with torch.from_dlpack(output) after the BLS response is gone (deleted, collected)
capsule    the same through to_dlpack()/torch.utils.dlpack.from_dlpack
async      the protocol path through `await request.async_exec()`
kept       answers the output of the last protocol-mode BLS call, kept as a torch view
"""

import gc

import torch
from torch.utils.dlpack import from_dlpack, to_dlpack

import triton_python_backend_utils as pb_utils


def bls_request(doubled, mode):
    given = to_dlpack(doubled) if mode == "capsule" else doubled
    return pb_utils.InferenceRequest(
        model_name="plus_one",
        inputs=[pb_utils.Tensor.from_dlpack("INPUT", given)],
        requested_output_names=["OUTPUT"],
    )


def into_torch(response, mode):
    if response.has_error():
        raise pb_utils.TritonModelException(response.error().message())
    output = pb_utils.get_output_tensor_by_name(response, "OUTPUT")
    return from_dlpack(output.to_dlpack()) if mode == "capsule" else torch.from_dlpack(output)


class TritonPythonModel:
    def initialize(self, args):
        self.last = None

    async def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if mode == "kept":
                out = pb_utils.Tensor.from_dlpack("Y", self.last * 10)
                responses.append(pb_utils.InferenceResponse([out]))
                continue
            x = torch.from_dlpack(pb_utils.get_input_tensor_by_name(request, "X"))
            call = bls_request(x * 2, mode)
            response = await call.async_exec() if mode == "async" else call.exec()
            got = into_torch(response, mode)
            # The BLS response and request go; the torch view must keep their memory.
            del response, call
            gc.collect()
            if mode == "protocol":
                self.last = got
            out = pb_utils.Tensor.from_dlpack("Y", got * 10)
            responses.append(pb_utils.InferenceResponse([out]))
        return responses
