import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for _ in requests:
            outputs = [
                # numpy 'S' arrays drop trailing NULs: b"c\x00" is stored as b"c".
                pb_utils.Tensor("FROM_S", np.array([b"ab", b"c\x00", b""], dtype=np.bytes_)),
                # object elements that are not bytes are sent as str(x).encode("utf-8").
                pb_utils.Tensor(
                    "FROM_OBJECT_MIXED",
                    np.array(["h\u00e9llo", 12, 1.5, b"\xff\x00"], dtype=object),
                ),
                pb_utils.Tensor(
                    "FROM_OBJECT_2D",
                    np.array([[b"a", b"bb", b"ccc"], [b"", b"e", b"f"]], dtype=object),
                ),
                pb_utils.Tensor("EMPTY", np.array([], dtype=object)),
            ]
            responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
        return responses
