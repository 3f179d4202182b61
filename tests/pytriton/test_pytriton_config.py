"""The configuration bind() generates (through Triton's protobuf schema) is the one
tritonserver loads: batcher, queue policies, decoupled, cache, optional inputs, strings,
one instance per callable."""

from __future__ import annotations

import numpy as np
import pytest

from integration_support.pytriton_helpers import loopback_config
from pybackend.pytriton.decorators import get_model_config
from pybackend.pytriton.exceptions import PyTritonBadParameterError
from pybackend.pytriton.model_config import (
    DynamicBatcher,
    ModelConfig,
    QueuePolicy,
    Tensor,
    TimeoutAction,
)
from pybackend.pytriton.model_config.triton_model_config import ResponseCache
from pybackend.pytriton.triton import Triton


def _identity(requests):
    return [{"OUTPUT_1": r["INPUT_1"]} for r in requests]


def test_generated_config_is_what_triton_loads() -> None:
    import tritonclient.http as httpclient

    batcher = DynamicBatcher(
        max_queue_delay_microseconds=100,
        preferred_batch_size=[2, 4],
        priority_levels=2,
        default_priority_level=1,
        default_queue_policy=QueuePolicy(TimeoutAction.DELAY, 5000, True, 10),
        priority_queue_policy={2: QueuePolicy(max_queue_size=3)},
    )
    with Triton(config=loopback_config(cache_config=["local,size=1048576"])) as triton:
        triton.bind(
            "Configured",
            [_identity, _identity],
            inputs=[
                Tensor(dtype=bytes, shape=(-1,)),
                Tensor(name="flag", dtype=np.bool_, shape=(1,), optional=True),
            ],
            outputs=[Tensor(dtype=np.bytes_, shape=(-1,))],
            config=ModelConfig(max_batch_size=16, batcher=batcher, response_cache=True),
        )
        server = triton.server
        assert server is not None
        client = httpclient.InferenceServerClient(server.http_url)
        config = client.get_model_config("Configured")
        client.close()
        # What a decorator's get_model_config sees holds PyTriton's ResponseCache.
        bound = get_model_config(_identity, None)
    assert bound.response_cache == ResponseCache(enable=True)
    assert bound.max_batch_size == 16 and bound.batcher is batcher
    assert config["max_batch_size"] == 16
    assert [(t["name"], t["data_type"]) for t in config["input"]] == [
        ("INPUT_1", "TYPE_STRING"),
        ("flag", "TYPE_BOOL"),
    ]
    assert config["input"][1]["optional"] is True
    assert config["output"][0]["name"] == "OUTPUT_1"
    assert config["instance_group"][0]["count"] == 2
    assert config["response_cache"]["enable"] is True
    dyn = config["dynamic_batching"]
    assert dyn["max_queue_delay_microseconds"] == 100
    assert dyn["preferred_batch_size"] == [2, 4]
    assert dyn["priority_levels"] == 2 and dyn["default_priority_level"] == 1
    assert dyn["default_queue_policy"] == {
        "timeout_action": "DELAY",
        "default_timeout_microseconds": 5000,
        "allow_timeout_override": True,
        "max_queue_size": 10,
    }
    assert dyn["priority_queue_policy"]["2"]["max_queue_size"] == 3


def test_decoupled_and_unbatched(triton: Triton) -> None:
    import tritonclient.http as httpclient

    triton.bind(
        "Plain",
        _identity,
        inputs=[Tensor(dtype=np.float32, shape=(2, 3))],
        outputs=[Tensor(dtype=np.float32, shape=(2, 3))],
        config=ModelConfig(batching=False, decoupled=True),
    )
    triton.run()
    server = triton.server
    assert server is not None
    client = httpclient.InferenceServerClient(server.http_url)
    config = client.get_model_config("Plain")
    client.close()
    assert config["max_batch_size"] == 0 and "dynamic_batching" not in config
    assert config["model_transaction_policy"]["decoupled"] is True
    assert config["input"][0]["dims"] == [2, 3]


def test_bad_batcher_values_are_refused_at_bind(triton: Triton) -> None:
    with pytest.raises(PyTritonBadParameterError, match="default_priority_level"):
        triton.bind(
            "Bad",
            _identity,
            inputs=[Tensor(dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(dtype=np.float32, shape=(-1,))],
            config=ModelConfig(batcher=DynamicBatcher(priority_levels=1, default_priority_level=3)),
        )
