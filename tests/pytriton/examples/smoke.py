"""bind() a batched and a decoupled callable, call both, print "ok": run by
tests/pytriton/test_lifecycle.py under this environment's numpy, and by
`make test-pytriton-numpy1` under .venv-pytriton's numpy 1.26 (the user's process is the
stub, so its numpy is the user's)."""

import sys

import numpy as np

from pybackend.pytriton.client import DecoupledModelClient, ModelClient
from pybackend.pytriton.decorators import batch
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton, TritonConfig
from pybackend.server.processes import free_ports

print("numpy", np.__version__, sys.version.split()[0])


@batch
def add(a, b):
    return {"s": a + b}


def stream(requests):
    for i in range(3):
        yield [{"s": r["a"] * i} for r in requests]


h, g, m = free_ports(3, "127.0.0.1")
cfg = TritonConfig(
    http_address="127.0.0.1", grpc_address="127.0.0.1", http_port=h, grpc_port=g, metrics_port=m
)
with Triton(config=cfg) as t:
    io = dict(
        inputs=[
            Tensor(name="a", dtype=np.float32, shape=(-1,)),
            Tensor(name="b", dtype=np.float32, shape=(-1,)),
        ],
        outputs=[Tensor(name="s", dtype=np.float32, shape=(-1,))],
    )
    t.bind("add", add, **io, config=ModelConfig(max_batch_size=8))
    t.bind("stream", stream, **io, config=ModelConfig(max_batch_size=8, decoupled=True))
    x = np.arange(4 * 1024 * 256, dtype=np.float32).reshape(1, -1)  # 1 MiB: through the arena
    with ModelClient(f"127.0.0.1:{h}", "add") as c:
        assert np.array_equal(c.infer_batch(x, x)["s"], 2 * x)
    with DecoupledModelClient(f"grpc://127.0.0.1:{g}", "stream") as c:
        print([float(r["s"][1]) for r in c.infer_sample(x[0], x[0])])
print("ok")
