"""A user's process bound into a running tritonserver (RemoteTriton) whose callable forks a
child that outlives the request (as a multiprocessing pool's worker or a daemonized helper
does). argv: the server's url, a file the child writes its pid to. Prints SERVING once bound,
then serves until it is killed."""

import os
import sys
import time

import numpy as np

from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import RemoteTriton

url, pid_file = sys.argv[1], sys.argv[2]


def infer(requests):
    if os.fork() == 0:  # the child keeps whatever the fork gave it, and sleeps
        with open(pid_file, "w") as f:
            f.write(str(os.getpid()))
        time.sleep(120)
        os._exit(0)
    return [{"y": r["x"] + 1} for r in requests]


with RemoteTriton(url=url) as remote:
    remote.bind(
        "Forker",
        infer,
        inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
        outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
        config=ModelConfig(max_batch_size=4),
    )
    print("SERVING", flush=True)
    while True:
        time.sleep(1)
