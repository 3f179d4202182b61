"""pb_utils.batch_requests / RequestBatch (UV-16/17): several requests of one execute()
stacked along dim 0 and split back, run in the offline harness with the real pb_utils types.
The same helper through tritonserver's dynamic batcher: tests/backend/test_batch_requests.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, List

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from pybackend.testing import ModelHarness

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "model_repository" / "stacked_scale"

CONFIG = """
backend: "python"
max_batch_size: 16
input [
  {{ name: "X", data_type: {dtype}, dims: [ -1 ] }},
  {{ name: "OPT", data_type: TYPE_FP32, dims: [ 1 ], optional: true }}
]
output [
  {{ name: "Y", data_type: {dtype}, dims: [ -1 ] }},
  {{ name: "ROWS", data_type: TYPE_INT32, dims: [ 1 ] }}
]
"""

MODEL = """
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        inputs, batch = pb_utils.batch_requests(requests, {kwargs})
        y = {body}
        rows = np.full((len(batch), 1), len(batch), np.int32)
        return batch.split({{"Y": y, "ROWS": rows}})
"""


def model_dir(tmp_path: Path, body: str, kwargs: str = "", dtype: str = "TYPE_FP32") -> Path:
    (tmp_path / "m" / "1").mkdir(parents=True)
    (tmp_path / "m" / "config.pbtxt").write_text(CONFIG.format(dtype=dtype))
    (tmp_path / "m" / "1" / "model.py").write_text(MODEL.format(kwargs=kwargs, body=body))
    return tmp_path / "m"


def outputs(response: Any) -> dict:
    assert not response.has_error(), response.error().message()
    return {t.name(): t.as_numpy() for t in response.output_tensors()}


def rows(n: int, width: int = 4, start: float = 0) -> np.ndarray:
    return (np.arange(n * width, dtype=np.float32) + start).reshape(n, width)


def test_requests_of_1_3_and_4_rows_round_trip(tmp_path):
    batch = [rows(1), rows(3, start=100), rows(4, start=200)]
    with ModelHarness(model_dir(tmp_path, 'inputs["X"] * 2')) as model:
        responses = model.execute([{"X": x} for x in batch])
    for x, response in zip(batch, responses):
        out = outputs(response)
        np.testing.assert_array_equal(out["Y"], x * 2)
        assert out["ROWS"].ravel().tolist() == [8] * len(x)  # one stacked array of 8 rows


def test_the_example_model_computes_each_batch_at_once():
    batch = [rows(2, 8), rows(1, 8, start=50)]
    weights = np.triu(np.ones((8, 8), np.float32))
    with ModelHarness(EXAMPLE) as model:
        responses = model.execute([{"INPUT0": x} for x in batch])
    for x, response in zip(batch, responses):
        out = outputs(response)
        np.testing.assert_allclose(out["OUTPUT0"], x @ weights)
        assert out["BATCH_ROWS"].ravel().tolist() == [3] * len(x)


def test_a_request_that_cannot_be_stacked_gets_its_own_error(tmp_path):
    with ModelHarness(model_dir(tmp_path, 'inputs["X"] * 2')) as model:
        requests = [
            model.request({"X": rows(1)}),
            model.request({"X": rows(2, width=5)}, request_id="wide"),
            model.request({"X": rows(4)}),
        ]
        first, wide, last = model.execute(requests)
    np.testing.assert_array_equal(outputs(first)["Y"], rows(1) * 2)
    np.testing.assert_array_equal(outputs(last)["Y"], rows(4) * 2)
    assert outputs(last)["ROWS"].ravel().tolist() == [5] * 4
    assert wide.error().code() == pb_utils.TritonError.INVALID_ARG
    assert wide.error().message() == (
        "batch_requests: request 1 of 3 (id 'wide') cannot be batched with the others: "
        "input 'X' has shape [2, 5], 2 other requests have rows of [4] (pass pad=... to "
        "batch_requests to pad ragged inputs)"
    )


def test_an_input_only_some_requests_have(tmp_path):
    with ModelHarness(model_dir(tmp_path, 'inputs["X"] + 1')) as model:
        with_opt = model.request({"X": rows(1), "OPT": np.ones((1, 1), np.float32)})
        responses = model.execute([{"X": rows(2)}, with_opt, {"X": rows(1)}])
        selected = model_dir(tmp_path / "sel", 'inputs["X"] + 1', kwargs='inputs=["X"]')
        with ModelHarness(selected) as only_x:
            again = model.execute([{"X": rows(2)}, with_opt, {"X": rows(1)}])
            chosen = only_x.execute(
                [{"X": rows(2)}, {"X": rows(1), "OPT": np.ones((1, 1), np.float32)}]
            )
    assert "input 'OPT', which 2 other requests of this batch lack" in (
        responses[1].error().message()
    )
    assert not again[0].has_error() and again[1].has_error()
    assert [outputs(r)["ROWS"][0, 0] for r in chosen] == [3, 3]


def test_ragged_inputs_are_padded_on_request(tmp_path):
    body = 'inputs["X"].sum(axis=1, keepdims=True)'
    with ModelHarness(model_dir(tmp_path, body, kwargs="pad=0.0")) as model:
        batch = [rows(2, width=3), rows(1, width=6), rows(3, width=1)]
        responses = model.execute([{"X": x} for x in batch])
    for x, response in zip(batch, responses):
        np.testing.assert_array_equal(outputs(response)["Y"], x.sum(axis=1, keepdims=True))


def test_bytes_inputs_stack_and_pad(tmp_path):
    body = 'np.array([[b"|".join(r)] for r in inputs["X"]], dtype=object)'
    model = model_dir(tmp_path, body, kwargs='pad=b"-"', dtype="TYPE_STRING")
    with ModelHarness(model) as harness:
        responses = harness.execute(
            [
                {"X": np.array([[b"a", b"b"]], dtype=object)},
                {"X": np.array([[b"c"], [b"d"]], dtype=object)},
            ]
        )
    assert outputs(responses[0])["Y"].tolist() == [[b"a|b"]]
    assert outputs(responses[1])["Y"].tolist() == [[b"c|-"], [b"d|-"]]


def test_outputs_with_the_wrong_number_of_rows_fail_the_batch(tmp_path):
    with ModelHarness(model_dir(tmp_path, 'inputs["X"][:-1]')) as model:
        responses = model.execute([{"X": rows(1)}, {"X": rows(3)}])
    for response in responses:
        assert (
            "RequestBatch: output 'Y' has 3 rows; the batch has 4 (requests of 1, 3 rows): "
            "return one row per stacked input row, in the same order"
        ) in response.error().message()


class _Sender:
    def __init__(self, log: List[Any]) -> None:
        self.log = log

    def send(self, response: Any = None, flags: int = 0) -> None:
        self.log.append((response, flags))


class _Request:
    """What batch_requests uses of a request: its inputs, id and response sender."""

    def __init__(self, x: np.ndarray, request_id: str = "") -> None:
        self._inputs = [pb_utils.Tensor("X", x)]
        self._id = request_id
        self.sent: List[Any] = []

    def inputs(self) -> list:
        return self._inputs

    def request_id(self) -> str:
        return self._id

    def get_response_sender(self) -> _Sender:
        return _Sender(self.sent)


def test_decoupled_send_streams_each_request_its_rows():
    requests = [_Request(rows(2)), _Request(rows(1, width=3), "odd"), _Request(rows(1))]
    inputs, batch = pb_utils.batch_requests(requests)
    batch.send({"Y": inputs["X"] * 2})
    batch.send({"Y": inputs["X"] * 3})
    batch.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
    for request, factor in ((requests[0], rows(2)), (requests[2], rows(1))):
        sent = request.sent
        assert [flags for _, flags in sent] == [0, 0, pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL]
        np.testing.assert_array_equal(sent[0][0].output_tensors()[0].as_numpy(), factor * 2)
        np.testing.assert_array_equal(sent[1][0].output_tensors()[0].as_numpy(), factor * 3)
        assert sent[2][0] is None
    # The request left out: its error, with FINAL, once.
    ((error, flags),) = requests[1].sent
    assert flags == pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
    assert "request 1 of 3 (id 'odd') cannot be batched" in error.error().message()
    assert batch.sizes == [2, 0, 1] and batch.rows(2) == slice(2, 3)
    assert batch.shapes[1] is None and batch.shapes[2] == {"X": (1, 4)}


@pytest.mark.parametrize(
    "bad", [np.array(1, np.float32), np.ones(3, np.float32)], ids=["scalar", "1-D"]
)
def test_outputs_that_are_not_rows_are_refused(bad):
    inputs, batch = pb_utils.batch_requests([_Request(rows(2))])
    with pytest.raises(pb_utils.TritonModelException, match="RequestBatch: output 'Y' has"):
        batch.split({"Y": bad})
