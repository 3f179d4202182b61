"""python_backend's examples/pytorch, rewritten from what it does: a torch.nn.Module that
answers the sum and the difference of its two inputs, its output types read from the model
configuration, "Cleaning up..." printed at finalize."""

import json

import torch
from torch import nn

import triton_python_backend_utils as pb_utils


class AddSub(nn.Module):
    def forward(self, first, second):
        return first + second, first - second


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        self.dtypes = [
            pb_utils.triton_string_to_numpy(
                pb_utils.get_output_config_by_name(config, name)["data_type"]
            )
            for name in ("OUTPUT0", "OUTPUT1")
        ]
        self.net = AddSub().eval()

    def execute(self, requests):
        responses = []
        for request in requests:
            first, second = (
                torch.from_numpy(pb_utils.get_input_tensor_by_name(request, name).as_numpy())
                for name in ("INPUT0", "INPUT1")
            )
            with torch.no_grad():
                results = self.net(first, second)
            outputs = [
                pb_utils.Tensor(name, result.numpy().astype(dtype))
                for name, result, dtype in zip(("OUTPUT0", "OUTPUT1"), results, self.dtypes)
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses

    def finalize(self):
        print("Cleaning up...")
