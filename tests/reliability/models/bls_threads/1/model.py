"""Concurrent BLS calls whose outputs are held a moment (see config.pbtxt)."""

import threading
import time

import numpy as np

import triton_python_backend_utils as pb_utils


def _call(size, results):
    request = pb_utils.InferenceRequest(
        model_name="big_identity",
        inputs=[
            pb_utils.Tensor("IN", np.zeros(1, np.uint8)),
            pb_utils.Tensor("GROW", np.array([size], np.int64)),
        ],
        requested_output_names=["OUT"],
    )
    response = request.exec()
    if response.has_error():
        results.append(response.error().message())
        return
    out = pb_utils.get_output_tensor_by_name(response, "OUT").as_numpy()
    time.sleep(0.3)
    results.append(out.nbytes == size)


class TritonPythonModel:
    def execute(self, requests):
        replies = []
        for request in requests:
            threads, size = (
                int(x) for x in pb_utils.get_input_tensor_by_name(request, "N").as_numpy()
            )
            results = []
            workers = [threading.Thread(target=_call, args=(size, results)) for _ in range(threads)]
            for w in workers:
                w.start()
            for w in workers:
                w.join()
            errors = [r for r in results if r is not True]
            if errors:
                raise pb_utils.TritonModelException(f"{len(errors)} calls failed: {errors[0]}")
            ok = np.array([len(results)], np.int64)
            replies.append(pb_utils.InferenceResponse([pb_utils.Tensor("OK", ok)]))
        return replies
