import threading
import time

from sender_plan import LATER_S, run


class TritonPythonModel:
    def execute(self, requests):
        return run(requests, self.later)

    def later(self, plans):
        def send_after():
            time.sleep(LATER_S)
            for plan in plans:
                plan.send_after()

        threading.Thread(target=send_after, daemon=True).start()
