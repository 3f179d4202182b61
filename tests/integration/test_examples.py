"""Every example model through a real tritonserver, over HTTP and gRPC.

Runs against our backend by default and against NVIDIA's original with
PYBACKEND_TEST_BACKEND=original: both must give exactly the same answers.
"""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from tritonclient.utils import InferenceServerException

from integration_support import EXAMPLES_REPOSITORY
from integration_support.clients import InferClient

EXAMPLE_MODELS = ("add_sub", "string_echo", "batched_scale", "error_model")
ERROR_MODEL_FILE = EXAMPLES_REPOSITORY / "error_model" / "1" / "model.py"


def _raise_line() -> int:
    lines = ERROR_MODEL_FILE.read_text().splitlines()
    return next(i for i, line in enumerate(lines, start=1) if "raise ValueError" in line)


def test_server_and_every_example_ready(client: InferClient) -> None:
    assert client.client.is_server_live()
    assert client.client.is_server_ready()
    for model in EXAMPLE_MODELS:
        assert client.client.is_model_ready(model), model


# ---------------------------------------------------------------------------- add_sub
@pytest.mark.parametrize("seed", range(5))
def test_add_sub_exact(client: InferClient, seed: int) -> None:
    rng = np.random.default_rng(seed)
    in0 = rng.standard_normal(4).astype(np.float32) * 1e3
    in1 = rng.standard_normal(4).astype(np.float32)
    out = client.infer("add_sub", {"INPUT0": in0, "INPUT1": in1}, ["OUTPUT0", "OUTPUT1"])
    assert out["OUTPUT0"].dtype == np.float32 and out["OUTPUT0"].shape == (4,)
    np.testing.assert_array_equal(out["OUTPUT0"], in0 + in1)
    np.testing.assert_array_equal(out["OUTPUT1"], in0 - in1)


def test_add_sub_special_values(client: InferClient) -> None:
    in0 = np.array([np.inf, -0.0, np.finfo(np.float32).max, 1e-45], dtype=np.float32)
    in1 = np.array([1.0, 0.0, np.finfo(np.float32).max, 1e-45], dtype=np.float32)
    out = client.infer("add_sub", {"INPUT0": in0, "INPUT1": in1}, ["OUTPUT0", "OUTPUT1"])
    with np.errstate(over="ignore"):  # max + max overflows to inf on purpose
        expected_sum, expected_difference = in0 + in1, in0 - in1
    np.testing.assert_array_equal(out["OUTPUT0"], expected_sum)
    np.testing.assert_array_equal(out["OUTPUT1"], expected_difference)


def test_add_sub_only_requested_output(client: InferClient) -> None:
    in0 = np.arange(4, dtype=np.float32)
    result = client.client.infer(
        "add_sub",
        client.inputs({"INPUT0": in0, "INPUT1": in0}),
        outputs=client.outputs(["OUTPUT1"]),
    )
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), np.zeros(4, dtype=np.float32))
    assert result.as_numpy("OUTPUT0") is None


# ---------------------------------------------------------------------------- BYTES
def _bytes_array(items: list[bytes], shape: tuple[int, ...]) -> np.ndarray:
    return np.array(items, dtype=np.object_).reshape(shape)


BYTES_CASES = {
    "words": _bytes_array([b"hello", b"world"], (1, 2)),
    "embedded_nuls": _bytes_array([b"a\x00b", b"\x00", b"\x00\x00x", b"abc\x00"], (1, 4)),
    "empty_strings": _bytes_array([b"", b"x", b"", b""], (2, 2)),
    "non_utf8": _bytes_array([b"\xff\xfe\x80", bytes(range(256)), b"\xc3\x28"], (1, 3)),
    "many_rows": _bytes_array(
        [f"row{r}-col{c}".encode() for r in range(8) for c in range(5)], (8, 5)
    ),
    "single": _bytes_array([b"only"], (1, 1)),
    "no_elements": _bytes_array([], (1, 0)),
    "large_element": _bytes_array([b"x" * 100_000 + b"\x00end", b"y"], (1, 2)),
}


@pytest.mark.parametrize("case", sorted(BYTES_CASES))
def test_string_echo_round_trip(client: InferClient, case: str) -> None:
    data = BYTES_CASES[case]
    out = client.infer("string_echo", {"INPUT0": data}, ["OUTPUT0", "OUTPUT1"])
    echoed, reversed_ = out["OUTPUT0"], out["OUTPUT1"]
    assert echoed.shape == data.shape and reversed_.shape == data.shape
    assert echoed.tolist() == data.tolist()
    assert reversed_.tolist() == [[item[::-1] for item in row] for row in data.tolist()]


def test_string_echo_unicode_text_arrives_as_utf8(client: InferClient) -> None:
    data = np.array([["héllo", "wörld", "日本"]], dtype=np.object_)
    out = client.infer("string_echo", {"INPUT0": data}, ["OUTPUT0", "OUTPUT1"])
    assert out["OUTPUT0"].tolist() == [[s.encode() for s in data[0]]]
    assert out["OUTPUT1"].tolist() == [[s.encode()[::-1] for s in data[0]]]


# ---------------------------------------------------------------------------- batching
@pytest.mark.parametrize("rows", [1, 3, 8])
def test_batched_scale_one_request(client: InferClient, rows: int) -> None:
    data = np.arange(rows * 4, dtype=np.float32).reshape(rows, 4) - 7.5
    out = client.infer("batched_scale", {"INPUT0": data}, ["OUTPUT0"])
    np.testing.assert_array_equal(out["OUTPUT0"], data * 2)


def _execution_counts(client: InferClient, model: str) -> tuple[int, int]:
    """(inference_count, execution_count) from Triton's statistics for model."""
    entry = client.statistics(model)
    return int(entry.get("inference_count", 0)), int(entry.get("execution_count", 0))


def _concurrent_infer(client: InferClient, batches: list[np.ndarray]) -> list[np.ndarray]:
    """Send every batch at once and return the OUTPUT0 of each, in order."""
    if client.protocol == "http":
        # tritonclient.http is gevent based: use its own async API rather than threads.
        pending = [
            client.client.async_infer(
                "batched_scale",
                client.inputs({"INPUT0": batch}),
                outputs=client.outputs(["OUTPUT0"]),
            )
            for batch in batches
        ]
        return [p.get_result(timeout=60).as_numpy("OUTPUT0") for p in pending]
    # All threads wait at the barrier so the requests reach the batcher together.
    barrier = threading.Barrier(len(batches))

    def one(batch: np.ndarray) -> np.ndarray:
        barrier.wait(timeout=30)
        return client.infer("batched_scale", {"INPUT0": batch}, ["OUTPUT0"])["OUTPUT0"]

    with ThreadPoolExecutor(max_workers=len(batches)) as pool:
        return list(pool.map(one, batches))


def test_batched_scale_concurrent_requests_are_batched(client: InferClient) -> None:
    rng = np.random.default_rng(7)
    batches = [rng.standard_normal((1 + i % 2, 4)).astype(np.float32) for i in range(16)]
    inferences_before, executions_before = _execution_counts(client, "batched_scale")
    results = _concurrent_infer(client, batches)
    for batch, result in zip(batches, results):
        np.testing.assert_array_equal(result, batch * 2)
    inferences_after, executions_after = _execution_counts(client, "batched_scale")
    rows = sum(len(b) for b in batches)
    assert inferences_after - inferences_before == rows
    # The dynamic batcher put several requests into one execute() call at least once.
    assert executions_after - executions_before < len(batches)


# ---------------------------------------------------------------------------- errors
def test_error_model_reports_the_exception(client: InferClient) -> None:
    with pytest.raises(InferenceServerException) as caught:
        client.infer("error_model", {"INPUT0": np.zeros(3, dtype=np.float32)}, ["OUTPUT0"])
    message = caught.value.message()
    # Triton's INTERNAL error code: HTTP 500, gRPC INTERNAL.
    assert str(caught.value.status()) in ("500", "StatusCode.INTERNAL")
    assert "Failed to process the request(s) for model '" in message
    assert "error_model refuses every request (first one had 3 values)" in message
    assert "ValueError" in message
    line = _raise_line()
    # The original renders frames as "file(line): func"; Python tracebacks as
    # 'File "file", line N'. Either way, the model.py and the line of the raise are named.
    frame = re.compile(rf"model\.py(\({line}\)|\", line {line}\b|:{line}\b)")
    assert frame.search(message), message


def test_server_healthy_after_model_error(client: InferClient) -> None:
    for _ in range(3):
        with pytest.raises(InferenceServerException):
            client.infer("error_model", {"INPUT0": np.ones(2, dtype=np.float32)}, ["OUTPUT0"])
    assert client.client.is_server_ready()
    assert client.client.is_model_ready("error_model")
    in0 = np.array([1, 2, 3, 4], dtype=np.float32)
    in1 = np.array([10, 20, 30, 40], dtype=np.float32)
    out = client.infer("add_sub", {"INPUT0": in0, "INPUT1": in1}, ["OUTPUT0", "OUTPUT1"])
    np.testing.assert_array_equal(out["OUTPUT0"], [11, 22, 33, 44])
    np.testing.assert_array_equal(out["OUTPUT1"], [-9, -18, -27, -36])
