import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


def out(value):
    return pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([value], np.int32))])


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        # In decoupled mode the coroutine runs in the background: it sends by itself and
        # from tasks it starts, while the instance takes the next requests.
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0])
            sender = request.get_response_sender()
            if mode == "raise":
                sender.send(out(0))
                await asyncio.sleep(0.005)
                raise ValueError("boom in async execute")
            if mode == "task_then_raise":
                # The task starts once the coroutine raised (it never awaits before that).
                task = asyncio.get_running_loop().create_task(self.stream(sender, count))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
                raise ValueError("boom after starting a task")
            if mode == "task":
                task = asyncio.get_running_loop().create_task(self.stream(sender, count))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)
            else:
                await self.stream(sender, count)
        return None

    async def stream(self, sender, count):
        for i in range(count):
            await asyncio.sleep(0.005)
            sender.send(out(i))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
