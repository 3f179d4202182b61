import asyncio

from sender_plan import LATER_S, run


class TritonPythonModel:
    def initialize(self, args):
        self.tasks = set()

    async def execute(self, requests):
        return run(requests, self.later)

    def later(self, plans):
        async def send_after():
            await asyncio.sleep(LATER_S)
            for plan in plans:
                plan.send_after()

        task = asyncio.get_running_loop().create_task(send_after())
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)
