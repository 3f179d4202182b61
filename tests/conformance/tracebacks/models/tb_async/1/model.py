import asyncio
import sys

import triton_python_backend_utils as pb_utils


class Stop(BaseException):
    """A model's own exception class outside Exception."""


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        if mode == "sys_exit":
            sys.exit(3)  # LINE:exit
        if mode == "base_exception":
            raise Stop("custom")  # LINE:base
        if mode == "raise":
            fail("async")  # LINE:execute
        return [pb_utils.InferenceResponse([]) for _ in requests]
