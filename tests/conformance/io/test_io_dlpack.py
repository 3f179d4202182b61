"""DLPack cases where ours is better than the original (docs/compatibility.md, deviations):
each side pinned against its backend."""

from __future__ import annotations

import numpy as np
import pytest

from conformance_support.clients import bytes_input, infer, infer_error

MODEL = "dlpack_cases"
VALUES = np.array([1, 2, 3, 4], np.int64)


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=[MODEL]) as srv:
        yield srv


def ask(server, mode: str):
    return infer(server, "http", MODEL, {"MODE": bytes_input(mode), "INPUT": VALUES})


@pytest.mark.deviation(
    "ours: an input's to_dlpack() and as_numpy() are the same memory, so a change made "
    "through the DLPack view shows in a later as_numpy()"
)
def test_a_change_through_to_dlpack_shows_in_as_numpy_on_ours(server):
    assert ask(server, "write_through_dlpack").outputs["OUT"].tolist() == [99, 2, 3, 4]


@pytest.mark.deviation(
    "the original's to_dlpack() of an input exports a copy: as_numpy() keeps the values",
    backend="original",
)
def test_a_change_through_to_dlpack_does_not_show_on_the_original(server):
    assert ask(server, "write_through_dlpack").outputs["OUT"].tolist() == [1, 2, 3, 4]


@pytest.mark.deviation("ours refuses a non-contiguous DLPack tensor instead of misreading it")
def test_strided_from_dlpack_is_refused_on_ours(server):
    error = infer_error(server, "http", MODEL, {"MODE": bytes_input("strided"), "INPUT": VALUES})
    assert "contiguous" in error.message


@pytest.mark.deviation(
    "the original checks every stride but the outermost, a 1-D tensor's only one: the data "
    "it returns is wrong",
    backend="original",
)
def test_strided_from_dlpack_returns_wrong_data_on_the_original(server):
    got = ask(server, "strided").outputs["OUT"].tolist()
    assert got != [1, 3]  # what the view holds
    assert got == [1, 2]  # the first two elements of the memory it points into
