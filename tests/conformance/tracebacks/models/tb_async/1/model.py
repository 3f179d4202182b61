import asyncio

import triton_python_backend_utils as pb_utils


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        fail("async")  # LINE:execute
        return [pb_utils.InferenceResponse([]) for _ in requests]
