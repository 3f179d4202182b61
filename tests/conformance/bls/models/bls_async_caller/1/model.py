import asyncio
import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    async def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
            result = await getattr(self, "mode_" + mode)(x)
            out = np.array([json.dumps(result).encode()], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)]))
        return responses

    async def mode_gather(self, x):
        calls = []
        for i, v in enumerate(x.tolist()):
            req = pb_utils.InferenceRequest(
                model_name="bls_identity",
                inputs=[pb_utils.Tensor("INPUT0", np.array([v, i], np.float32))],
                requested_output_names=["OUTPUT1"],
            )
            calls.append(req.async_exec())
        results = await asyncio.gather(*calls)
        return {
            "outputs": [
                pb_utils.get_output_tensor_by_name(r, "OUTPUT1").as_numpy().tolist()
                for r in results
            ]
        }

    async def mode_stream(self, x):
        req = pb_utils.InferenceRequest(
            model_name="bls_stream",
            inputs=[
                pb_utils.Tensor("COUNT", np.array([int(x[0])], np.int32)),
                pb_utils.Tensor("DELAY_MS", np.array([0], np.int32)),
            ],
            requested_output_names=["OUT"],
        )
        it = await req.async_exec(decoupled=True)
        seen = []
        for r in it:
            seen.append([t.as_numpy().tolist() for t in r.output_tensors()])
        return {"seen": seen}

    async def mode_stream_final(self, x):
        # A callee whose last response carries the FINAL flag (qa async_execute_decouple).
        found = {}
        for count in (1, 3, 0):
            req = pb_utils.InferenceRequest(
                model_name="bls_stream_final",
                inputs=[pb_utils.Tensor("COUNT", np.array([count], np.int32))],
                requested_output_names=["OUT"],
            )
            it = await req.async_exec(decoupled=True)
            found[str(count)] = [[t.as_numpy().tolist() for t in r.output_tensors()] for r in it]
        return found

    async def mode_async_for(self, x):
        # pybackend extension: `async for` over a decoupled stream, while another coroutine
        # keeps running on the same loop.
        ticks = []

        async def ticker():
            while True:
                ticks.append(1)
                await asyncio.sleep(0.005)

        task = asyncio.ensure_future(ticker())
        req = pb_utils.InferenceRequest(
            model_name="bls_stream",
            inputs=[
                pb_utils.Tensor("COUNT", np.array([int(x[0])], np.int32)),
                pb_utils.Tensor("DELAY_MS", np.array([50], np.int32)),
            ],
            requested_output_names=["OUT"],
        )
        seen = []
        async for r in await req.async_exec(decoupled=True):
            seen.append([t.as_numpy().tolist() for t in r.output_tensors()])
        task.cancel()
        return {"seen": seen, "ticked": len(ticks) > 5}

    async def mode_error(self, x):
        req = pb_utils.InferenceRequest(
            model_name="no_such_model",
            inputs=[pb_utils.Tensor("INPUT0", x)],
            requested_output_names=["OUTPUT0"],
        )
        r = await req.async_exec()
        return {"has_error": r.has_error(), "error": r.error().message() if r.has_error() else ""}
