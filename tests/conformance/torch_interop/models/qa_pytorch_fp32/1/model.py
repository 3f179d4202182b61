import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

import triton_python_backend_utils as pb_utils


class Net(nn.Module):
    """A small MNIST-shaped convolutional network, initialised from seed 0."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = torch.flatten(F.max_pool2d(x, 2), 1)
        return F.log_softmax(self.fc2(F.relu(self.fc1(x))), dim=1)


class TritonPythonModel:
    def initialize(self, args):
        torch.manual_seed(0)
        self.net = Net().eval()

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            with torch.no_grad():
                result = self.net(torch.tensor(np.array(data)))
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", result.numpy())]))
        return responses
