import asyncio

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    """The pattern of NVIDIA's qa `async_execute_decouple`: a decoupled `async def execute`
    that sleeps WAIT_SECONDS per batch row (all rows at once with asyncio.gather) and
    answers each request with one FINAL response through its sender. A negative wait
    closes every request and raises ValueError (only logged, as the original does).

    Differences from the qa model, on purpose: DUMMY_OUT has the configured shape
    [batch, 1] (the qa model returns [batch], which only item 1's lenient output check
    lets through), and OVERLAP reports the largest number of this instance's sleeps that
    ran at once while this execute was running, so concurrency is counted, not timed."""

    def initialize(self, args):
        self.sleeping = 0
        self.active = {}  # execute id -> largest `sleeping` seen while it ran
        self.next_id = 0

    async def _sleep(self, seconds):
        self.sleeping += 1
        for key in self.active:
            self.active[key] = max(self.active[key], self.sleeping)
        try:
            await asyncio.sleep(seconds)
        finally:
            self.sleeping -= 1

    async def execute(self, requests):
        key = self.next_id
        self.next_id += 1
        self.active[key] = 0
        try:
            batches = []
            tasks = []
            for request in requests:
                waits = pb_utils.get_input_tensor_by_name(request, "WAIT_SECONDS").as_numpy()
                for row in waits:
                    if row[0] < 0:
                        self.raise_value_error(requests)
                    tasks.append(asyncio.create_task(self._sleep(float(row[0]))))
                batches.append((request.get_response_sender(), waits.shape[0]))
            await asyncio.gather(*tasks)
            overlap = self.active[key]
        finally:
            del self.active[key]
        for sender, batch_size in batches:
            dummy = pb_utils.Tensor("DUMMY_OUT", np.zeros((batch_size, 1), np.float32))
            seen = pb_utils.Tensor("OVERLAP", np.full((batch_size, 1), overlap, np.int32))
            sender.send(
                pb_utils.InferenceResponse(output_tensors=[dummy, seen]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None

    def raise_value_error(self, requests):
        for request in requests:
            request.get_response_sender().send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        raise ValueError("wait_secs cannot be negative")
