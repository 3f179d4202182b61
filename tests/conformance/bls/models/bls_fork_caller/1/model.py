import json
import multiprocessing
import os
from multiprocessing import Pool

import numpy as np

import triton_python_backend_utils as pb_utils


def identity_call(i):
    """What each worker of qa's test_multiprocess does: one blocking exec() and a check."""
    x = (np.arange(16, dtype=np.float32) + i).astype(np.float32)
    request = pb_utils.InferenceRequest(
        model_name="bls_identity",
        inputs=[pb_utils.Tensor("INPUT0", x)],
        requested_output_names=["OUTPUT0", "OUTPUT1"],
    )
    response = request.exec()
    if response.has_error():
        return "error: " + response.error().message()
    y = pb_utils.get_output_tensor_by_name(response, "OUTPUT1").as_numpy()
    return bool(np.array_equal(y, x * 2))


def large_call(i):
    # 1 MiB each way: in the parent these would travel through shared memory.
    x = np.full(262144, float(i), np.float32)
    request = pb_utils.InferenceRequest(
        model_name="bls_identity",
        inputs=[pb_utils.Tensor("INPUT0", x)],
        requested_output_names=["OUTPUT1"],
    )
    response = request.exec()
    if response.has_error():
        return "error: " + response.error().message()
    y = pb_utils.get_output_tensor_by_name(response, "OUTPUT1").as_numpy()
    return bool(np.array_equal(y, x * 2))


def stream_call(count):
    request = pb_utils.InferenceRequest(
        model_name="bls_stream",
        inputs=[
            pb_utils.Tensor("COUNT", np.array([count], np.int32)),
            pb_utils.Tensor("DELAY_MS", np.array([0], np.int32)),
        ],
        requested_output_names=["OUT"],
    )
    seen = []
    for response in request.exec(decoupled=True):
        if response.has_error():
            return "error: " + response.error().message()
        out = pb_utils.get_output_tensor_by_name(response, "OUT")
        seen.append(None if out is None else int(out.as_numpy()[0]))
    return seen


def error_text(_):
    try:
        response = pb_utils.InferenceRequest(
            model_name="bls_identity",
            inputs=[pb_utils.Tensor("INPUT0", np.zeros(2, np.float32))],
            requested_output_names=["OUTPUT0"],
        ).exec()
    except Exception as e:  # noqa: BLE001 - the report says what happened
        return "raised: " + str(e)
    if response.has_error():
        return "error: " + response.error().message()
    return "ok"


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            result = getattr(self, "mode_" + mode)()
            out = np.array([json.dumps(result).encode()], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)]))
        return responses

    def mode_pool(self):
        # qa python_models/bls test_multiprocess, as written there.
        pool = Pool(10)
        results = pool.map(identity_call, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        pool.close()
        pool.join()
        return {"results": results, "after": identity_call(0)}

    def mode_pool_large(self):
        with multiprocessing.get_context("fork").Pool(4) as pool:
            results = pool.map(large_call, range(8))
        return {"results": results, "after": large_call(1)}

    def mode_pool_stream(self):
        with multiprocessing.get_context("fork").Pool(3) as pool:
            results = pool.map(stream_call, [0, 1, 3])
        return {"results": results}

    def mode_fork(self):
        # A bare os.fork(): the child calls exec() twice and reports through a pipe.
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(r)
                got = [identity_call(3), identity_call(4)]
                os.write(w, json.dumps(got).encode())
            finally:
                os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            got = json.loads(f.read() or b"null")
        _, status = os.waitpid(pid, 0)
        return {"child": got, "status": status, "after": identity_call(5)}

    def mode_spawn(self):
        found = {}
        for method in ("spawn", "forkserver"):
            with multiprocessing.get_context(method).Pool(1) as pool:
                found[method] = pool.map(error_text, [0])[0]
        return {"result": found, "after": identity_call(0)}
