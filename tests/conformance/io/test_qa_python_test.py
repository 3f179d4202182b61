"""NVIDIA's qa `L0_backend_python/python_test.py` (and the loads its test.sh checks) that
no other module of ours already covers, through one real server: dynamic batching with its
statistics and metrics, BYTES outputs in both numpy forms (also empty), optional inputs
none of which is sent, non-contiguous numpy outputs, an output asked into a shared memory
region too small for it, a model whose import is slow, and the server's environment
reaching the stub. docs/qa_coverage.md maps every case."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

from conformance_support.clients import PROTOCOLS, bytes_input, infer, text_output
from conformance_support.control import http_client, is_ready
from conformance_support.metrics_endpoint import key, samples, scrape

MODELS = [
    "qa_identity_uint8",
    "qa_identity_bool",
    "qa_dlpack_identity",
    "qa_string",
    "qa_string_fixed",
    "qa_optional",
    "qa_non_contiguous",
    "qa_delayed",
    "qa_model_env",
]


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit", load_models=MODELS, env={"MY_ENV": "MY_ENV"}
    )
    with start as srv:
        yield srv


def test_four_requests_run_as_one_batch_of_eight(server):
    """qa test_async_infer: four [2, 2] requests reach execute together (preferred batch 8);
    statistics and metrics count 4 requests, 8 inferences, 1 execution."""
    model = "qa_identity_uint8"
    rng = np.random.default_rng(3)
    sent = [rng.integers(0, 256, size=(2, 2), dtype=np.uint8) for _ in range(4)]
    with ThreadPoolExecutor(len(sent)) as pool:
        futures = [pool.submit(infer, server, "http", model, {"INPUT0": d}) for d in sent]
        results = [f.result() for f in futures]
    for data, result in zip(sent, results):
        assert np.array_equal(result.outputs["OUTPUT0"], data)

    with http_client(server) as client:
        (stat,) = client.get_inference_statistics(model)["model_stats"]
    assert stat["name"] == model
    assert (stat["inference_count"], stat["execution_count"]) == (8, 1)
    assert [b["batch_size"] for b in stat["batch_stats"]] == [8]

    text = scrape(server)
    counted = {
        name: samples(text, name)[key(name, model=model, version="1")]
        for name in (
            "nv_inference_request_success",
            "nv_inference_count",
            "nv_inference_exec_count",
        )
    }
    assert counted == {
        "nv_inference_request_success": 4,
        "nv_inference_count": 8,
        "nv_inference_exec_count": 1,
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_utf8_text_comes_back_from_both_numpy_forms(server, protocol):
    """qa test_unicode: an emoji sent as BYTES comes back whether the model's output array
    is numpy 'S' or object (the model alternates)."""
    emoji = "\U0001f600".encode()
    for _ in range(2):
        result = infer(server, protocol, "qa_string", {"INPUT0": bytes_input(emoji)})
        assert result.datatypes["OUTPUT0"] == "BYTES"
        assert result.outputs["OUTPUT0"].tolist() == [emoji]


def test_fixed_and_empty_bytes_outputs_in_both_numpy_forms(server):
    """qa test_string: "123456" then an empty output, as numpy 'S' then as object."""
    got = []
    for _ in range(4):
        result = infer(server, "http", "qa_string_fixed", {"INPUT0": bytes_input("123456")})
        got.append((result.datatypes["OUTPUT0"], result.outputs["OUTPUT0"].tolist()))
    assert got == [("BYTES", [b"123456"]), ("BYTES", []), ("BYTES", [b"123456"]), ("BYTES", [])]


@pytest.mark.parametrize("sent", [("INPUT0", "INPUT1"), ("INPUT0",), ("INPUT1",), ()])
def test_optional_inputs_any_subset_even_none(server, sent):
    """qa test_optional_input: the model sees None for each input not sent, also when the
    request carries no input at all."""
    values = {"INPUT0": np.array([40], np.int32), "INPUT1": np.array([2], np.int32)}
    result = infer(server, "http", "qa_optional", {name: values[name] for name in sent})
    first = values["INPUT0"] if "INPUT0" in sent else np.array([5], np.int32)
    second = values["INPUT1"] if "INPUT1" in sent else np.array([5], np.int32)
    assert result.outputs["OUTPUT0"].tolist() == (first + second).tolist()
    assert result.outputs["OUTPUT1"].tolist() == (first - second).tolist()


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_non_contiguous_numpy_outputs(server, protocol):
    """qa test_non_contiguous: a reshape, a transpose and an axis permutation of the input
    arrive with the values numpy shows."""
    data = np.random.default_rng(5).random((2, 10, 11, 6, 5), dtype=np.float32)
    result = infer(server, protocol, "qa_non_contiguous", {"INPUT0": data})
    assert np.array_equal(result.outputs["OUTPUT0"], data.reshape(10, 2, 6, 5, 11))
    assert np.array_equal(result.outputs["OUTPUT1"], data.T)
    assert np.array_equal(result.outputs["OUTPUT2"], np.transpose(data, [1, 0, 4, 2, 3]))


def test_a_model_with_a_slow_import_loads_and_serves(server):
    """qa test.sh delayed_model: model.py sleeps at import; the load waits for it."""
    assert is_ready(server, "qa_delayed")
    data = np.arange(3, dtype=np.float32)
    assert infer(server, "http", "qa_delayed", {"IN": data}).outputs["OUT"].tolist() == [0, 1, 2]


def test_the_servers_environment_reaches_the_model(server):
    """qa test.sh model_env: MY_ENV set for tritonserver is in the stub's os.environ (the
    model's initialize raises without it, so the load itself is the check)."""
    assert is_ready(server, "qa_model_env")
    result = infer(server, "http", "qa_model_env", {"NAME": bytes_input("MY_ENV")})
    assert text_output(result, "VALUE") == "MY_ENV"


@pytest.mark.parametrize(
    "model,data",
    [
        ("qa_identity_bool", np.ones((1, 1000), dtype=bool)),
        ("qa_dlpack_identity", np.ones((1, 1000), dtype=np.float32)),
    ],
)
def test_an_output_region_too_small_is_an_error(server, model, data):
    """qa test_gpu_tensor_error / test_dlpack_tensor_error with system shared memory in
    place of CUDA shared memory (no GPU here): OUTPUT0 asked into a 1-byte region fails
    with the server's text naming the size it needs; the server keeps serving."""
    name = f"qa_small_{model}"
    region = shm.create_shared_memory_region(name, f"/{name}_{os.getpid()}", 1)
    with http_client(server) as client:
        client.register_system_shared_memory(name, f"/{name}_{os.getpid()}", 1)
        try:
            infer_input = httpclient.InferInput(
                "INPUT0", list(data.shape), np_to_triton_dtype(data.dtype)
            )
            infer_input.set_data_from_numpy(data)
            wanted = httpclient.InferRequestedOutput("OUTPUT0")
            wanted.set_shared_memory(name, 1)
            with pytest.raises(InferenceServerException) as caught:
                client.infer(model, [infer_input], outputs=[wanted])
            assert f"should be at least {data.nbytes} bytes to hold the results" in str(
                caught.value
            )
        finally:
            client.unregister_system_shared_memory(name)
            shm.destroy_shared_memory_region(region)
    again = infer(server, "http", model, {"INPUT0": data})
    assert np.array_equal(again.outputs["OUTPUT0"], data)
