"""Input arrays as model code finds them (models/input_layout), the same on both backends:
every numeric datatype, few elements (carried in the message, ours) and many (in shared
memory), each element at an address aligned for its type, C-contiguous and writeable in
place. Before, ours handed small inputs over at whatever offset the message put them
(numpy's ``aligned`` flag false: slow loops, and C extensions that need alignment copy or
fail); the original's shared memory is 16-byte aligned."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output

MODEL = "input_layout"
TYPES = {
    "BOOL": np.bool_,
    "UINT8": np.uint8,
    "UINT16": np.uint16,
    "UINT32": np.uint32,
    "UINT64": np.uint64,
    "INT8": np.int8,
    "INT16": np.int16,
    "INT32": np.int32,
    "INT64": np.int64,
    "FP16": np.float16,
    "FP32": np.float32,
    "FP64": np.float64,
}
# Input names of five lengths (config.pbtxt), so the data starts at varied offsets.
NAMES = {t: "X" * (i % 5 + 1) + "_" + t for i, t in enumerate(TYPES)}


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start_models([MODEL]) as srv:
        yield srv


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("count", [1, 3, 1000, 100_000])
def test_inputs_are_aligned_contiguous_and_writeable(server, protocol, count):
    inputs = {NAMES[t]: (np.arange(count) % 2).astype(d) for t, d in TYPES.items()}
    report = json.loads(text_output(infer(server, protocol, MODEL, inputs), "REPORT"))
    expected = {"aligned", "on_itemsize", "c_contiguous", "writeable", "changed_in_place"}
    assert {name: sorted(k for k, v in r.items() if v) for name, r in report.items()} == {
        name: sorted(expected) for name in NAMES.values()
    }
