"""PyTriton's documented CPU examples (its repository's examples/: add_sub_python,
add_sub_python_with_optional, identity_python, multiple_models_python,
use_parameters_and_headers), bound as they are there with only the import prefix changed,
served through the real tritonserver and called with PyTriton's clients."""

from __future__ import annotations

import numpy as np
import pytest

from integration_support.pytriton_helpers import loopback_config, urls
from pybackend.pytriton.client import ModelClient
from pybackend.pytriton.decorators import batch, fill_optionals, first_value
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton


@batch
def _add_sub(**inputs):
    a_batch, b_batch = inputs.values()
    return {"add": a_batch + b_batch, "sub": a_batch - b_batch}


@pytest.mark.parametrize("scheme", [0, 1], ids=["http", "grpc"])
def test_add_sub_python(triton: Triton, scheme: int) -> None:
    triton.bind(
        model_name="AddSub",
        infer_func=_add_sub,
        inputs=[Tensor(dtype=np.float32, shape=(-1,)), Tensor(dtype=np.float32, shape=(-1,))],
        outputs=[
            Tensor(name="add", dtype=np.float32, shape=(-1,)),
            Tensor(name="sub", dtype=np.float32, shape=(-1,)),
        ],
        config=ModelConfig(max_batch_size=128),
        strict=True,
    )
    triton.run()
    a = np.random.rand(4, 3).astype(np.float32)
    b = np.random.rand(4, 3).astype(np.float32)
    with ModelClient(urls(triton)[scheme], "AddSub") as client:
        result = client.infer_batch(a, b)
        sample = client.infer_sample(a[0], b[0])
    np.testing.assert_allclose(result["add"], a + b)
    np.testing.assert_allclose(result["sub"], a - b)
    np.testing.assert_allclose(sample["add"], a[0] + b[0])


@fill_optionals(t=np.array([2.0], dtype=np.float32))
@batch
@first_value("w")
def _add_sub_optional(a, b, t, **inputs):
    w = 1 if "w" not in inputs else inputs["w"]
    return {"add": a * w + b + t, "sub": a * w - b + t}


def test_add_sub_python_with_optional(triton: Triton) -> None:
    triton.bind(
        model_name="AddSub",
        infer_func=_add_sub_optional,
        inputs=[
            Tensor(dtype=np.float32, shape=(-1,), name="a"),
            Tensor(dtype=np.float32, shape=(-1,), name="b"),
            Tensor(dtype=np.float32, shape=(-1,), name="t", optional=True),
            Tensor(dtype=np.float32, shape=(-1,), name="w", optional=True),
        ],
        outputs=[
            Tensor(name="add", dtype=np.float32, shape=(-1,)),
            Tensor(name="sub", dtype=np.float32, shape=(-1,)),
        ],
        config=ModelConfig(max_batch_size=128),
    )
    triton.run()
    a = np.ones((2, 1), np.float32)
    b = np.full((2, 1), 3.0, np.float32)
    with ModelClient(urls(triton)[0], "AddSub") as client:
        default = client.infer_batch(a=a, b=b)  # t filled with 2, no w
        weighted = client.infer_batch(a=a, b=b, w=np.full((2, 1), 5.0, np.float32))
    np.testing.assert_allclose(default["add"], a + b + 2)
    np.testing.assert_allclose(default["sub"], a - b + 2)
    np.testing.assert_allclose(weighted["add"], a * 5 + b + 2)


@batch
def _identity(**inputs):
    return {"OUTPUT_1": inputs["INPUT_1"], "OUTPUT_2": inputs["INPUT_2"]}


@pytest.mark.parametrize("scheme", [0, 1], ids=["http", "grpc"])
def test_identity_python(triton: Triton, scheme: int) -> None:
    triton.bind(
        model_name="Identity",
        infer_func=_identity,
        inputs=[Tensor(dtype=np.float64, shape=(-1,)), Tensor(dtype=object, shape=(1,))],
        outputs=[Tensor(dtype=np.float64, shape=(-1,)), Tensor(dtype=object, shape=(1,))],
        config=ModelConfig(max_batch_size=128),
    )
    triton.run()
    floats = np.random.rand(4, 4)
    raw = np.array([[b"\xff\x00\x00\x00"]] * 4, dtype=object)  # NULs must survive
    with ModelClient(urls(triton)[scheme], "Identity") as client:
        result = client.infer_batch(floats, raw)
    np.testing.assert_array_equal(result["OUTPUT_1"], floats)
    assert result["OUTPUT_2"].tolist() == raw.tolist()


@batch
def _multiply2(multiplicand):
    return [multiplicand * 2.0]


@batch
def _multiply4(multiplicand):
    return [multiplicand * 4.0]


def test_multiple_models_python(triton: Triton) -> None:
    for name, fn in (("Multiply2", _multiply2), ("Multiply4", _multiply4)):
        triton.bind(
            model_name=name,
            infer_func=fn,
            inputs=[Tensor(name="multiplicand", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="product", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=8),
            strict=True,
        )
    triton.run()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for name, factor in (("Multiply2", 2), ("Multiply4", 4)):
        with ModelClient(urls(triton)[0], name) as client:
            np.testing.assert_allclose(client.infer_batch(x)["product"], x * factor)


def _infer_with_params_and_headers(requests):
    responses = []
    for req in requests:
        a_batch, b_batch = req.values()
        scaled_add = (a_batch + b_batch) / float(req.parameters["header_divisor"])
        scaled_sub = (a_batch - b_batch) * float(req.parameters["parameter_multiplier"])
        responses.append({"scaled_add": scaled_add, "scaled_sub": scaled_sub})
    return responses


def test_use_parameters_and_headers() -> None:
    with Triton(config=loopback_config(http_header_forward_pattern="header.*")) as triton:
        triton.bind(
            model_name="ParamsAndHeaders",
            infer_func=_infer_with_params_and_headers,
            inputs=[Tensor(dtype=np.float32, shape=(-1,)), Tensor(dtype=np.float32, shape=(-1,))],
            outputs=[
                Tensor(name="scaled_add", dtype=np.float32, shape=(-1,)),
                Tensor(name="scaled_sub", dtype=np.float32, shape=(-1,)),
            ],
            config=ModelConfig(max_batch_size=128),
            strict=True,
        )
        a = np.full((2, 2), 6.0, np.float32)
        b = np.full((2, 2), 2.0, np.float32)
        with ModelClient(urls(triton)[0], "ParamsAndHeaders") as client:
            result = client.infer_batch(
                a, b, parameters={"parameter_multiplier": 3}, headers={"header_divisor": 4}
            )
    np.testing.assert_allclose(result["scaled_add"], (a + b) / 4)
    np.testing.assert_allclose(result["scaled_sub"], (a - b) * 3)


def test_response_cache_and_log_verbose_options() -> None:
    """TritonConfig's cache_config and log_verbose reach tritonserver; ModelConfig's
    response_cache turns the cache on for the model: the second identical request is
    answered without calling the callable."""
    calls = []

    def double(requests):
        calls.append(len(requests))
        return [{"y": r["x"] * 2} for r in requests]

    config = loopback_config(cache_config=["local,size=1048576"], log_verbose=1)
    with Triton(config=config) as triton:
        triton.bind(
            "Cached",
            double,
            inputs=[Tensor(name="x", dtype=np.float32, shape=(-1,))],
            outputs=[Tensor(name="y", dtype=np.float32, shape=(-1,))],
            config=ModelConfig(max_batch_size=8, response_cache=True),
        )
        x = np.arange(3, dtype=np.float32)
        with ModelClient(urls(triton)[0], "Cached") as client:
            first = client.infer_sample(x)["y"]
            second = client.infer_sample(x)["y"]
        server = triton.server
        assert server is not None
        server.log_text()
    np.testing.assert_array_equal(first, x * 2)
    np.testing.assert_array_equal(second, x * 2)
    assert calls == [1]
    assert "--log-verbose=1" in " ".join(server.command)
