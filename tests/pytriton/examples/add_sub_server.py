"""PyTriton's examples/add_sub_python/server.py as its users run it (Triton() configured
from PYTRITON_TRITON_CONFIG_* variables, serve() until Ctrl-C), with the imports changed
from ``pytriton.`` to ``pybackend.pytriton.``. With SLOW_S set the callable first sleeps
that long (for tests that kill this process in the middle of a request)."""

import logging
import os
import time

import numpy as np

from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton

logger = logging.getLogger("examples.add_sub_python.server")
logging.basicConfig(
    level=logging.INFO, format="%(asctime)s - %(levelname)s - %(name)s: %(message)s"
)


@batch
def _add_sub(**inputs):
    time.sleep(float(os.environ.get("SLOW_S", "0")))
    a_batch, b_batch = inputs.values()
    add_batch = a_batch + b_batch
    sub_batch = a_batch - b_batch
    return {"add": add_batch, "sub": sub_batch}


with Triton() as triton:
    logger.info("Loading AddSub model")
    triton.bind(
        model_name="AddSub",
        infer_func=_add_sub,
        inputs=[
            Tensor(dtype=np.float32, shape=(-1,)),
            Tensor(dtype=np.float32, shape=(-1,)),
        ],
        outputs=[
            Tensor(name="add", dtype=np.float32, shape=(-1,)),
            Tensor(name="sub", dtype=np.float32, shape=(-1,)),
        ],
        config=ModelConfig(max_batch_size=128),
        strict=True,
    )
    logger.info("Serving model")
    print("SERVING", flush=True)
    triton.serve()
