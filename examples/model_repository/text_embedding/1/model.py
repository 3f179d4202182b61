"""A stand-in for a sentence-embedding model: each word of a text is hashed to one of 64
dimensions (with a sign), and the text's vector is the sum, scaled to length 1. Texts that
share words point the same way, so cosine similarity behaves as with a real model.

A real model (sentence-transformers, say) loads in `initialize` and encodes the batch's texts
in one call, as `execute` does here. `dimensions` keeps the first n values, scaled to length 1
again (as models trained for shorter vectors are used).
"""

import zlib

import numpy as np

import triton_python_backend_utils as pb_utils

WIDTH = 64


def embed(text):
    vector = np.zeros(WIDTH, np.float32)
    for word in text.lower().split():
        code = zlib.crc32(word.strip(".,;:!?\"'").encode())
        vector[code % WIDTH] += 1.0 if code & 0x80000000 else -1.0
    return vector


def unit(vector):
    norm = np.linalg.norm(vector)
    return vector / norm if norm else vector


def value(request, name):
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return None if tensor is None else tensor.as_numpy().ravel()[0]


class TritonPythonModel:
    def execute(self, requests):
        texts = [value(request, "text_input").decode() for request in requests]
        vectors = np.stack([embed(text) for text in texts])  # the batch in one go
        responses = []
        for request, vector in zip(requests, vectors):
            dimensions = value(request, "dimensions")
            if dimensions is not None and not 1 <= dimensions <= WIDTH:
                error = pb_utils.TritonError(
                    f"dimensions must be 1 to {WIDTH}, got {dimensions}",
                    pb_utils.TritonError.INVALID_ARG,
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            kept = unit(vector[:dimensions] if dimensions is not None else vector)
            tensor = pb_utils.Tensor("embedding", kept[None, :].astype(np.float32))
            responses.append(pb_utils.InferenceResponse([tensor]))
        return responses
