"""`pybackend infer`'s NAME=VALUE forms turned into arrays of the declared type and shape."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from pybackend.cli.infer_inputs import InputError, InputSpec, build_inputs


def _one(text: str, datatype: str, shape: list) -> np.ndarray:
    return build_inputs([f"X={text}"], [InputSpec("X", datatype, shape)], "m")["X"]


def test_inline_values() -> None:
    assert _one("true,false,1,0", "BOOL", [4]).tolist() == [True, False, True, False]
    assert _one("1.5, 2", "FP32", [-1]).dtype == np.float32
    assert _one("[[1,2],[3,4]]", "INT64", [-1, 2]).tolist() == [[1, 2], [3, 4]]
    # a batched model (-1 first): a batch of one added; flat values take a fixed shape
    assert _one("1,2,3,4", "INT32", [-1, 2, 2]).shape == (1, 2, 2)
    assert _one("1,2,3,4", "INT32", [-1, 4]).shape == (1, 4)
    assert _one("7", "INT8", [1]).tolist() == [7]
    assert _one("héllo, world", "BYTES", [1]).tolist() == ["héllo, world".encode()]
    assert _one('["a","b"]', "BYTES", [-1]).tolist() == [b"a", b"b"]


def test_files(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", np.arange(6, dtype=np.int16).reshape(2, 3))
    (tmp_path / "x.json").write_text(json.dumps([[1, 2, 3], [4, 5, 6]]))
    assert _one(f"@{tmp_path}/x.npy", "FP32", [-1, 3]).tolist() == [[0, 1, 2], [3, 4, 5]]
    assert _one(f"@{tmp_path}/x.json", "UINT8", [2, 3]).dtype == np.uint8


@pytest.mark.parametrize(
    "given, message",
    [
        (["X=1,2,3"], "X: 3 values of shape [3] do not fit its shape [2, 2] (-1: any size)"),
        (["X=@/nonexistent.npy"], "X: no file /nonexistent.npy"),
        (["X"], "'X': give an input as NAME=VALUE, NAME=@file.npy or NAME=@file.json"),
        (["Y=1"], "model 'm' has no input 'Y' (its inputs: X (FP32, [2, 2]))"),
        ([], "model 'm' needs X (FP32, shape [2, 2]): give X=..."),
    ],
)
def test_refused(given: list, message: str) -> None:
    with pytest.raises(InputError) as info:
        build_inputs(given, [InputSpec("X", "FP32", [2, 2])], "m")
    assert str(info.value).startswith(message)


def test_an_optional_input_may_be_left_out() -> None:
    specs = [InputSpec("X", "FP32", [1]), InputSpec("LIMIT", "INT32", [1], optional=True)]
    assert list(build_inputs(["X=1"], specs, "m")) == ["X"]
