"""A CPU tensor's DLPack capsule holds one reference to the pb_utils.Tensor while it lives,
as the original's does (NVIDIA's qa decoupled_bls counts it with sys.getrefcount)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from pybackend.utils.tensor import Tensor


@pytest.mark.parametrize("read_only", [False, True])
def test_to_dlpack_adds_one_reference_until_the_capsule_is_gone(read_only: bool) -> None:
    array = np.arange(4, dtype=np.float32)
    array.flags.writeable = not read_only
    tensor = Tensor("X", array)
    before = sys.getrefcount(tensor)
    capsule = tensor.to_dlpack()
    assert sys.getrefcount(tensor) - before == 1
    del capsule
    assert sys.getrefcount(tensor) - before == 0


def test_a_consumer_keeps_the_reference_until_it_lets_go() -> None:
    tensor = Tensor("X", np.arange(3, dtype=np.int32))
    before = sys.getrefcount(tensor)
    view = np.from_dlpack(tensor)
    assert view.tolist() == [0, 1, 2]
    assert sys.getrefcount(tensor) - before == 1
    del view
    assert sys.getrefcount(tensor) - before == 0
