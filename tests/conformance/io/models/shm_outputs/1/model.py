"""Outputs in shared memory (UV-12). OUT_EMPTY is written in place into Tensor.empty,
OUT_VIEW is the input itself, OUT_COPY a fresh numpy array. COPIES reports how many
output copies the stub made into its shared memory so far (before this request's own
outputs are placed), WHERE which mapping holds the Tensor.empty memory."""

import numpy as np

import triton_python_backend_utils as pb_utils


def _mapping_of(address):
    with open("/proc/self/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if lo <= address < hi:
                return " ".join(fields[5:])
    return ""


class TritonPythonModel:
    def initialize(self, args):
        # Count the stub's copies of outputs into its arena (test instrumentation).
        from pybackend.ipc import arena

        self.copies = 0
        write = arena.Arena.write

        def counting_write(arena_self, seg_id, offset, data):
            self.copies += 1
            return write(arena_self, seg_id, offset, data)

        arena.Arena.write = counting_write

    def execute(self, requests):
        responses = []
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            out = pb_utils.Tensor.empty("OUT_EMPTY", x.shape, np.float32)
            np.multiply(x, 2, out=out.as_numpy())
            where = _mapping_of(out.as_numpy().__array_interface__["data"][0])
            responses.append(
                pb_utils.InferenceResponse(
                    [
                        out,
                        pb_utils.Tensor("OUT_VIEW", x),
                        pb_utils.Tensor("OUT_COPY", x + 1),
                        pb_utils.Tensor("COPIES", np.array([self.copies], np.int64)),
                        pb_utils.Tensor("WHERE", np.array([where.encode()], dtype=object)),
                    ]
                )
            )
        return responses
