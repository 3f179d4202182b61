"""Python models that count their concurrent executes, for test_rate_limiter.py and
test_instance_groups.py: what runs at once is counted by the model, never timed.

Every instance of every mode (own and fork instances are separate processes, shared ones
threads of one) updates one JSON file per counter under an flock: how many executes are in
at once now (``current``) and at most (``peak``), the instances that initialized and
executed, with the CPU affinity and NUMA memory policy of the thread they ran on.

A plain execute answers request ``IN = [L]`` only once ``L`` executes have entered since
the start of its round of ``L`` (entry indexes ``k*L .. k*L+L-1``), then stays a little
longer unless more than ``L`` are in: ``L`` must be able to run at once, and one more than
``L`` that could would be seen. A decoupled execute returns at once and leaves its final
response to a thread that waits until ``IN = [N]`` executes have entered."""

from __future__ import annotations

import json
import pathlib
import textwrap
from typing import Any

MODES = ("own", "shared", "fork")

COUNTING_PY = textwrap.dedent('''
    import asyncio
    import fcntl
    import json
    import os
    import threading
    import time

    import numpy as np
    import triton_python_backend_utils as pb_utils

    ROUND_WAIT = 20.0  # the rest of a round must come (the test fails if it does not)
    GRACE = 0.2  # time for an execute beyond the limit to show itself


    def update(path, change):
        with open(path + ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                try:
                    with open(path) as f:
                        state = json.load(f)
                except FileNotFoundError:
                    state = {"current": 0, "peak": 0, "entries": 0, "inits": [],
                             "executes": [], "finals": []}
                result = change(state)
                with open(path + ".tmp", "w") as f:
                    json.dump(state, f)
                os.replace(path + ".tmp", path)
                return result
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)


    def placement():
        """The calling thread's CPUs, and its NUMA memory policy as numa_maps shows it."""
        try:
            with open("/proc/thread-self/numa_maps") as f:
                policy = f.readline().split()[1]
        except (OSError, IndexError):
            policy = ""
        return sorted(os.sched_getaffinity(0)), policy


    def wait_until(path, condition, seconds):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not condition(update(path, dict)):
            time.sleep(0.005)


    class TritonPythonModel:
        def initialize(self, args):
            config = json.loads(args["model_config"])
            self.path = config["parameters"]["COUNTER"]["string_value"]
            self.name = args["model_instance_name"]
            self.decoupled = pb_utils.using_decoupled_model_transaction_policy(config)
            where = placement()
            update(self.path, lambda s: s["inits"].append([self.name, *where]))

        def enter(self, state):
            state["current"] += 1
            state["peak"] = max(state["peak"], state["current"])
            state["entries"] += 1
            state["executes"].append([self.name, *placement()])
            return state["entries"] - 1

        @staticmethod
        def leave(state):
            state["current"] -= 1

        def answer(self, index):
            out = pb_utils.Tensor("OUT", np.array([index], np.int32))
            return pb_utils.InferenceResponse([out])

        def execute(self, requests):
            answers = []
            for request in requests:
                n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                index = update(self.path, self.enter)
                if self.decoupled:
                    threading.Thread(target=self.finish, args=(request, index, n)).start()
                else:
                    end_of_round = (index // n + 1) * n
                    wait_until(self.path, lambda s: s["entries"] >= end_of_round, ROUND_WAIT)
                    wait_until(self.path, lambda s: s["current"] > n, GRACE)
                    answers.append(self.answer(index))
                update(self.path, self.leave)
            return answers or None

        def finish(self, request, index, n):
            wait_until(self.path, lambda s: s["entries"] >= n, ROUND_WAIT)
            entered = update(self.path, lambda s: s["entries"])
            update(self.path, lambda s: s["finals"].append([index, entered]))
            request.get_response_sender().send(
                self.answer(index), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
            )
''')

# `async def execute` of a decoupled model: each coroutine stays in until IN = [N] were in
# at once.
ASYNC_PY = COUNTING_PY + textwrap.dedent("""


    class TritonPythonModel(TritonPythonModel):
        async def execute(self, requests):
            for request in requests:
                n = int(pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()[0])
                index = update(self.path, self.enter)
                end = time.monotonic() + ROUND_WAIT
                while time.monotonic() < end and update(self.path, dict)["peak"] < n:
                    await asyncio.sleep(0.005)
                update(self.path, self.leave)
                request.get_response_sender().send(
                    self.answer(index), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                )
            return None
""")

IO = """
max_batch_size: 0
input [ { name: "IN" data_type: TYPE_INT32 dims: [ 1 ] } ]
output [ { name: "OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]
"""


def write_model(
    repository: pathlib.Path,
    name: str,
    groups: str,
    counter: pathlib.Path,
    mode: str,
    *,
    decoupled: bool = False,
    coroutine: bool = False,
) -> None:
    """``groups``: the text inside ``instance_group [ ... ]``."""
    (repository / name / "1").mkdir(parents=True)
    source = ASYNC_PY if coroutine else COUNTING_PY
    (repository / name / "1" / "model.py").write_text(source)
    config = f'backend: "python"\n{IO}instance_group [ {groups} ]\n'
    config += f'parameters {{ key: "COUNTER" value: {{ string_value: "{counter}" }} }}\n'
    if mode != "own":
        config += (
            'parameters { key: "PYBACKEND_INSTANCE_PROCESS" '
            f'value: {{ string_value: "{mode}" }} }}\n'
        )
    if decoupled:
        config += "model_transaction_policy { decoupled: true }\n"
    (repository / name / "config.pbtxt").write_text(config)


def read_counter(counter: pathlib.Path) -> dict[str, Any]:
    return json.loads(counter.read_text())
