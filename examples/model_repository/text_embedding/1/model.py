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


def texts_of(request):
    """The request's texts: one per row (the endpoint sends one; a client may send more)."""
    tensor = pb_utils.get_input_tensor_by_name(request, "text_input")
    return [text.decode() for text in tensor.as_numpy().ravel()]


def dimensions_of(request):
    tensor = pb_utils.get_input_tensor_by_name(request, "dimensions")
    return None if tensor is None else int(tensor.as_numpy().ravel()[0])


class TritonPythonModel:
    def execute(self, requests):
        texts = [texts_of(request) for request in requests]
        # The batch's texts in one go, then each request's rows.
        vectors = np.stack([embed(text) for rows in texts for text in rows])
        responses, first = [], 0
        for request, rows in zip(requests, texts):
            mine, first = vectors[first : first + len(rows)], first + len(rows)
            dimensions = dimensions_of(request)
            if dimensions is not None and not 1 <= dimensions <= WIDTH:
                error = pb_utils.TritonError(
                    f"dimensions must be 1 to {WIDTH}, got {dimensions}",
                    pb_utils.TritonError.INVALID_ARG,
                )
                responses.append(pb_utils.InferenceResponse(error=error))
                continue
            kept = np.stack([unit(v[:dimensions]) for v in mine]).astype(np.float32)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("embedding", kept)]))
        return responses
