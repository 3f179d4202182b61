"""tritonclient's HTTP and gRPC clients behind one small interface for parametrised tests."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass
class InferClient:
    protocol: str  # "http" or "grpc"
    module: Any  # tritonclient.http or tritonclient.grpc
    client: Any  # its InferenceServerClient

    def inputs(self, arrays: Mapping[str, np.ndarray]) -> list[Any]:
        from tritonclient.utils import np_to_triton_dtype

        built = []
        for name, array in arrays.items():
            dtype = np_to_triton_dtype(array.dtype)
            infer_input = self.module.InferInput(name, list(array.shape), dtype)
            if self.protocol == "http":
                infer_input.set_data_from_numpy(array, binary_data=True)
            else:
                infer_input.set_data_from_numpy(array)
            built.append(infer_input)
        return built

    def outputs(self, names: Sequence[str]) -> list[Any]:
        if self.protocol == "http":
            return [self.module.InferRequestedOutput(n, binary_data=True) for n in names]
        return [self.module.InferRequestedOutput(n) for n in names]

    def infer(
        self, model: str, arrays: Mapping[str, np.ndarray], outputs: Sequence[str]
    ) -> dict[str, np.ndarray]:
        result = self.client.infer(model, self.inputs(arrays), outputs=self.outputs(outputs))
        return {name: result.as_numpy(name) for name in outputs}

    def statistics(self, model: str) -> dict[str, Any]:
        """Triton's statistics for model as a plain dict (gRPC's int64 come back as str)."""
        if self.protocol == "http":
            stats = self.client.get_inference_statistics(model)
        else:
            stats = self.client.get_inference_statistics(model, as_json=True)
        return stats["model_stats"][0]


def probe_answer(client: Any, model: str, output: str) -> bytes:
    """What a probe model answers (the backend tests' models that report what their stub
    sees): one request with IN = [0] (INT32 [1]) over ``client`` (tritonclient.http's
    InferenceServerClient), the first element of its string output ``output``."""
    import tritonclient.http as httpclient

    inp = httpclient.InferInput("IN", [1], "INT32")
    inp.set_data_from_numpy(np.array([0], np.int32))
    return client.infer(model, [inp]).as_numpy(output)[0]
