import asyncio


def fail(what):
    raise ValueError(f"{what} boom")  # LINE:fail


class TritonPythonModel:
    async def execute(self, requests):
        await asyncio.sleep(0)
        fail("async decoupled")  # LINE:execute
        return None
