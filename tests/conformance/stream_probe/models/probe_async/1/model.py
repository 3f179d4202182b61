"""async execute with BLS streams to probe_callee: forwarding after execute returned, a
callee's error midway, an async_exec cancelled by asyncio, outputs kept past their response."""

import asyncio
import gc
import json

import numpy as np

import triton_python_backend_utils as pb_utils

FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL


def callee(mode):
    return pb_utils.InferenceRequest(
        model_name="probe_callee",
        inputs=[pb_utils.Tensor("MODE", np.array([mode.encode()], np.object_))],
        requested_output_names=["OUT"],
    )


def report(response):
    out = pb_utils.get_output_tensor_by_name(response, "OUT")
    return {
        "error": response.error().message() if response.has_error() else None,
        "out": None if out is None else out.as_numpy().tolist(),
    }


def msg(found):
    text = np.array([json.dumps(found).encode()], np.object_)
    return pb_utils.InferenceResponse([pb_utils.Tensor("MSG", text)])


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            sender = request.get_response_sender()
            if mode == "forward_after_return":
                # Execute returns at once; a task streams the callee's responses on.
                task = asyncio.ensure_future(self.forward(sender))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                continue
            if mode == "forward_tensors":
                # The BLS output Tensor objects themselves go into the client's responses.
                for response in await callee("three").async_exec(decoupled=True):
                    out = pb_utils.get_output_tensor_by_name(response, "OUT")
                    if out is not None:
                        sender.send(pb_utils.InferenceResponse([out]))
                big = pb_utils.get_output_tensor_by_name(
                    next(callee("big").exec(decoupled=True)), "OUT"
                )
                sender.send(pb_utils.InferenceResponse([big]), flags=FINAL)
                continue
            found = await getattr(self, "case_" + mode)()
            sender.send(msg(found), flags=FINAL)
        return None

    async def forward(self, sender):
        it = await callee("three").async_exec(decoupled=True)
        for response in it:
            out = pb_utils.get_output_tensor_by_name(response, "OUT")
            if out is not None:
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out.as_numpy())]))
        sender.send(flags=FINAL)

    async def case_error_mid(self):
        it = await callee("error_mid").async_exec(decoupled=True)
        return [report(r) for r in it]

    async def case_raise_mid(self):
        it = await callee("raise_mid").async_exec(decoupled=True)
        return [report(r) for r in it]

    async def case_sync_error_mid(self):
        return [report(r) for r in callee("error_mid").exec(decoupled=True)]

    async def case_cancel_async_exec(self):
        task = asyncio.ensure_future(callee("slow").async_exec(decoupled=True))
        await asyncio.sleep(0.2)
        task.cancel()
        try:
            await task
            outcome = "finished"
        except asyncio.CancelledError:
            outcome = "cancelled"
        # The callee and the BLS path still answer afterwards.
        after = [report(r) for r in await callee("three").async_exec(decoupled=True)]
        return {"outcome": outcome, "after": after}

    async def case_output_kept(self):
        it = callee("big").exec(decoupled=True)
        response = next(it)
        tensor = pb_utils.get_output_tensor_by_name(response, "OUT")
        del response, it
        gc.collect()
        # A second call that may reuse the memory of the first one's output.
        again = [report(r) for r in callee("big").exec(decoupled=True)]
        array = tensor.as_numpy()
        return {
            "sum": int(array.astype(np.int64).sum()),
            "len": int(array.size),
            "again_len": len(again[0]["out"]),
        }
