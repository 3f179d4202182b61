"""PyTriton's decorators on plain lists of request dicts (no server): their documented
semantics, on functions and on methods."""

from __future__ import annotations

from typing import Any, Iterator

import numpy as np
import pytest

from pybackend.pytriton._context import TritonContext, TritonModelConfig, serving
from pybackend.pytriton.decorators import (
    ConstantPadder,
    batch,
    fill_optionals,
    first_value,
    group_by_keys,
    group_by_values,
    pad_batch,
    sample,
    triton_context,
)
from pybackend.pytriton.exceptions import (
    PyTritonBadParameterError,
    PyTritonRuntimeError,
    PyTritonValidationError,
)
from pybackend.pytriton.model_config import DynamicBatcher, Tensor

CONFIG = TritonModelConfig(
    model_name="M",
    max_batch_size=8,
    batcher=DynamicBatcher(preferred_batch_size=[2, 4]),
    inputs=[
        Tensor((-1,), np.float32, "a"),
        Tensor((-1,), np.float32, "b"),
        Tensor((1,), np.float32, "t", optional=True),
    ],
    outputs=[Tensor((-1,), np.float32, "out"), Tensor((-1,), np.float32, "other")],
)


@pytest.fixture(autouse=True)
def _model() -> Iterator[None]:
    with serving(CONFIG, TritonContext()):
        yield


def rows(*values: float) -> np.ndarray:
    return np.array([[v] for v in values], np.float32)


def test_batch_stacks_and_cuts_back() -> None:
    calls = []

    @batch
    def infer(a, b):
        calls.append(a.shape)
        return {"out": a + b}

    requests = [{"a": rows(1, 2), "b": rows(10, 20)}, {"a": rows(3), "b": rows(30)}]
    result = infer(requests)
    assert calls == [(3, 1)]
    assert [r["out"].ravel().tolist() for r in result] == [[11, 22], [33]]


def test_batch_list_outputs_follow_the_config_order_and_sizes_are_checked() -> None:
    @batch
    def as_list(a, b):
        return [a, b]

    result = as_list([{"a": rows(1), "b": rows(2)}])
    assert set(result[0]) == {"out", "other"}

    @batch
    def wrong_rows(a, b):
        return {"out": a[:1]}

    # PyTriton's type and text: a ValueError naming the shapes.
    wrong = r"different batch sizes: out: \(1, 1\)\. Expected batch size: 2"
    with pytest.raises(ValueError, match=wrong):
        wrong_rows([{"a": rows(1, 2), "b": rows(1, 2)}])
    with pytest.raises(PyTritonValidationError, match="different set of inputs keys"):
        as_list([{"a": rows(1)}, {"b": rows(1)}])


def test_batch_on_a_method_and_a_generator() -> None:
    class Model:
        factor = 3

        @batch
        def __call__(self, a, b):
            for i in range(2):
                yield {"out": a * self.factor + i}

    steps = list(Model()([{"a": rows(1), "b": rows(0)}, {"a": rows(2), "b": rows(0)}]))
    assert [[r["out"].item() for r in step] for step in steps] == [[3, 6], [4, 7]]


def test_sample_passes_the_first_request_as_keywords() -> None:
    @sample
    def infer(a, b):
        return {"out": a - b}

    assert infer([{"a": np.float32([5]), "b": np.float32([2])}])[0]["out"].tolist() == [3]


def test_group_by_keys_calls_once_per_key_set_in_order() -> None:
    seen = []

    @group_by_keys
    def infer(requests):
        seen.append(sorted(requests[0]))
        return [{"out": r["a"]} for r in requests]

    requests = [{"a": rows(1)}, {"a": rows(2), "b": rows(0)}, {"a": rows(3)}]
    result = infer(requests)
    assert [r["out"].item() for r in result] == [1, 2, 3]
    assert sorted(seen) == [["a"], ["a", "b"]]


def test_group_by_values_and_constant_padder() -> None:
    @batch
    @group_by_values("b", pad_fn=ConstantPadder(0))
    def infer(a, b):
        width = int(b[0, 0])
        return {"out": np.repeat(a, width, axis=1)}

    result = infer([{"a": rows(1, 2, 3), "b": rows(1, 2, 1)}])
    assert result[0]["out"].tolist() == [[1, 0], [2, 2], [3, 0]]

    @group_by_values("b")
    @batch
    def wrong_order(a, b):
        return {"out": a}

    with pytest.raises(PyTritonRuntimeError, match="must be used after the @batch"):
        wrong_order(a=rows(1), b=rows(1))


def test_pad_batch_repeats_the_last_row_up_to_a_preferred_size() -> None:
    @batch
    @pad_batch
    def infer(a, b):
        assert a.shape[0] == 4  # 3 rows -> preferred size 4
        return {"out": a[:3]}

    out = infer([{"a": rows(1, 2, 3), "b": rows(0, 0, 0)}])
    assert out[0]["out"].ravel().tolist() == [1, 2, 3]


def test_first_value_and_its_strict_check() -> None:
    @batch
    @first_value("b")
    def infer(a, b):
        return {"out": a * b}

    assert infer([{"a": rows(1, 2), "b": rows(5, 5)}])[0]["out"].ravel().tolist() == [5, 10]
    with pytest.raises(PyTritonRuntimeError, match="The values on the 'b' input are not equal"):
        infer([{"a": rows(1, 2), "b": rows(5, 6)}])
    with pytest.raises(PyTritonBadParameterError, match="not allowed as keys"):
        first_value("__triton_context__")


def test_fill_optionals_tiles_defaults_over_the_batch() -> None:
    @fill_optionals(t=np.array([7.0], np.float32))
    def infer(requests):
        return [{"out": r["t"]} for r in requests]

    out = infer([{"a": rows(1, 2), "b": rows(1, 2)}, {"a": rows(1), "b": rows(1), "t": rows(0)}])
    assert out[0]["out"].tolist() == [[7.0], [7.0]] and out[1]["out"].tolist() == [[0.0]]
    with pytest.raises(PyTritonBadParameterError, match="Could not found nope inputs"):
        fill_optionals(nope=np.array([1.0], np.float32))(lambda r: r)([{"a": rows(1)}])


def test_triton_context_is_passed() -> None:
    got: list = []

    @triton_context
    def infer(requests: Any, **kwargs: Any):
        got.append(kwargs["triton_context"])
        return []

    infer([])
    assert isinstance(got[0], TritonContext)
