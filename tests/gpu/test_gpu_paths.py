"""GPU paths beyond one tensor in and out, through the real tritonserver on a server of their
own (the models of gpu_path_models.py; the server runs with CUDA_VISIBLE_DEVICES set): GPU
outputs of a decoupled model's response sender, a view of Triton's own GPU memory returned
as an output, BLS preferred_memory GPU when the device has no memory to spare, ISOLATE_GPU
under a server with its own device list, more stub allocations than the backend keeps mapped,
and GPU tensors CUDA IPC cannot share, staged through host memory with one warning.

Copies are counted by the backend (pybackend_gpu_copies_total) and pointers compared inside
the stub, as in the other files. The staging test runs last: before it, no stub of this
server may have staged anything.
"""

from __future__ import annotations

import os
import queue
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
import pytest
from gpu_io_models import VIEW_OUTPUT_NAMES, write_io_models
from gpu_path_models import ALLOCATIONS, BLOCK_ELEMENTS, OFFSETS, PATH_MODELS
from gpu_support import (
    KDL_CUDA,
    STAGING_WARNING,
    CudaRegion,
    N,
    assert_no_staging,
    assert_pointers,
    copies,
    copies_since,
    cuda_regions_of,
    infer,
    infer_at_once,
    ipc_handles,
    log_tail,
    request_parts,
    sample,
    serve,
    wait_for,
)

if TYPE_CHECKING:
    from pybackend.server import TritonServer

pytestmark = pytest.mark.gpu

#: The server's own device list: one GPU, the first this process sees (the GPU machine has
#: one): so CUDA shared memory made here on device 0 is on the server's device 0.
SERVER_DEVICES = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip() or "0"
#: Responses a decoupled model sends per request.
COUNT = 4
#: Requests sent at once to the dynamically batching model.
BATCHED = 4
#: Stub allocations the backend keeps mapped per stub (csrc/cuda/ipc_cache.h, kMaxOpen).
MAX_MAPPINGS = 64


@pytest.fixture(scope="module")
def paths_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TritonServer]:
    repository = write_io_models(tmp_path_factory.mktemp("gpu_path_models"), PATH_MODELS)
    with serve(repository, env={"CUDA_VISIBLE_DEVICES": SERVER_DEVICES}) as server:
        yield server


@pytest.fixture(scope="module")
def client(paths_server: TritonServer) -> Iterator[Any]:
    import tritonclient.grpc as grpcclient

    made = grpcclient.InferenceServerClient(url=paths_server.grpc_url)
    yield made
    made.close()


@pytest.fixture
def regions(client: Any) -> Iterator[Callable[[int], CudaRegion]]:
    """make(nbytes): a CUDA shared-memory region registered with this module's server."""
    with cuda_regions_of(client, "gpu-paths") as make:
        yield make


def ready(client: Any, server: TritonServer, *models: str) -> None:
    """Fail with the server's log when a model did not load (before its counters are read)."""
    for model in models:
        assert client.is_model_ready(model), f"{model} did not load; {log_tail(server)}"


def stream(client: Any, server: TritonServer, model: str, inputs: Any) -> list[dict[str, Any]]:
    """One request to a decoupled model over a gRPC stream: its COUNT responses, in order of
    arrival; fails on an error response, on a missing one and on one too many."""
    results: queue.Queue[tuple[Any, Any]] = queue.Queue()
    infer_inputs, requested = request_parts(inputs, ["OUT", "INDEX"], {})
    got = []
    client.start_stream(callback=lambda result, error: results.put((result, error)))
    try:
        client.async_stream_infer(model, infer_inputs, outputs=requested)
        for _ in range(COUNT):
            try:
                result, error = results.get(timeout=60)
            except queue.Empty:
                raise AssertionError(
                    f"{model}: {len(got)} of {COUNT} responses within 60 s; {log_tail(server)}"
                ) from None
            assert error is None, f"{model}: response {len(got)}: {error}; {log_tail(server)}"
            got.append({name: result.as_numpy(name) for name in ("OUT", "INDEX")})
    finally:
        client.stop_stream()  # waits for the server to end the stream
    extra = [results.get_nowait() for _ in range(results.qsize())]
    assert not extra, f"{model}: {len(extra)} responses after the final one: {extra}"
    return got


@pytest.mark.parametrize("model", ["decoupled_torch", "decoupled_cupy"])
def test_a_decoupled_model_sends_gpu_outputs_through_its_response_sender(
    client: Any, paths_server: TritonServer, model: str
) -> None:
    """COUNT responses per request, each with a new GPU tensor of the stub's (torch: sent
    from a thread after execute returned; cupy: from execute): every one reaches the client
    with its own values, each is one device-to-host copy into gRPC's buffer, no other copy,
    and nothing is staged through the stub's host memory."""
    if model.endswith("cupy"):
        pytest.importorskip("cupy", reason="cupy is not installed on this GPU machine")
    ready(client, paths_server, model)
    x = sample()
    before = copies(paths_server, model)
    for r in range(N):
        y = x + r
        got = stream(client, paths_server, model, {"IN": y, "COUNT": np.array([COUNT], np.int32)})
        assert [int(g["INDEX"][0]) for g in got] == list(range(COUNT))
        for i, g in enumerate(got):
            np.testing.assert_allclose(g["OUT"], y * (i + 1), rtol=1e-6, err_msg=f"response {i}")
    counted = copies_since(paths_server, model, before)
    assert counted == {"d2d": 0, "d2h": N * COUNT, "h2d": 0}, counted
    assert_no_staging(paths_server)


@pytest.mark.parametrize("consumer", sorted(OFFSETS))
def test_a_view_of_tritons_own_gpu_memory_goes_back_under_the_backends_handle(
    client: Any, paths_server: TritonServer, consumer: str
) -> None:
    """ens_produce's GPU output is the ensemble's intermediate tensor, in memory Triton
    allocated; the consumer (FORCE_CPU_ONLY_INPUT_TENSORS "no") gets it with no copy and
    returns IN[OFFSET:], a view of it (same memory: pointers compared in the stub). The stub
    cannot export memory it imported, so the output names the backend's own allocation,
    which the backend reads directly: one device copy into the ensemble's output buffer,
    no host copy, and the values are the view's."""
    offset = OFFSETS[consumer]
    ensemble = f"ensemble_{consumer}"
    x = sample()
    models = ("ens_produce", consumer)
    ready(client, paths_server, ensemble, *models)
    before = {m: copies(paths_server, m) for m in models}
    for i in range(N):
        y = x + i
        got = infer(client, paths_server, ensemble, {"IN": y}, ["OUT", "PTRS"])
        np.testing.assert_allclose(got["OUT"], (y * 2)[offset:], rtol=1e-6)
        into, view, out = got["PTRS"].tolist()
        assert into != 0 and view == into + 4 * offset and out == view, got["PTRS"].tolist()
    counted = {m: copies_since(paths_server, m, before[m]) for m in models}
    expected = {"d2d": N, "d2h": 0, "h2d": 0}
    assert counted == {"ens_produce": expected, consumer: expected}, counted
    assert_no_staging(paths_server)


def test_an_isolated_stub_under_a_server_with_its_own_device_list(
    client: Any, paths_server: TritonServer, regions: Callable[[int], CudaRegion]
) -> None:
    """The server runs with CUDA_VISIBLE_DEVICES=SERVER_DEVICES. ISOLATE_GPU "yes": the stub
    gets that list's entry of its device, sees one device, its current one; a GPU input (the
    client's CUDA shared memory) reaches it on device 0 in the backend's numbering and its
    view goes back with two device copies and no host copy, as without isolation."""
    x = sample()
    got = infer(client, paths_server, "isolated_gpu", {"IN": x}, ["OUT", "VISIBLE", "DEVICES"])
    np.testing.assert_allclose(got["OUT"], x * 2, rtol=1e-6)
    assert got["VISIBLE"].tolist() == [SERVER_DEVICES.encode()], got["VISIBLE"]
    assert got["DEVICES"].tolist() == [1, 0], got["DEVICES"]

    region_in, region_out = regions(x.nbytes), regions(x.nbytes)
    ready(client, paths_server, "isolated_view")
    before = copies(paths_server, "isolated_view")
    for i in range(N):
        y = x - i
        region_out.write(np.zeros_like(y))
        got = infer(
            client, paths_server, "isolated_view", {"IN": (region_in, y)}, VIEW_OUTPUT_NAMES,
            {"OUT": (region_out, y.nbytes)},
        )  # fmt: skip
        np.testing.assert_array_equal(got["OUT"], y)
        assert got["IN_IS_CPU"].tolist() == [False]
        assert got["DEVICE"].tolist() == [KDL_CUDA, 0, 0]
        assert_pointers(got["PTRS"], view=True)
    counted = copies_since(paths_server, "isolated_view", before)
    assert counted == {"d2d": 2 * N, "d2h": 0, "h2d": 0}, counted
    assert_no_staging(paths_server)


def test_more_stub_allocations_than_the_backend_maps_stay_bounded_and_correct(
    client: Any, paths_server: TritonServer
) -> None:
    """many_allocs returns a different one of ALLOCATIONS (80) live cudaMalloc blocks per
    request, then goes round again. The backend maps each block once (its gauge counts them
    up), never more than MAX_MAPPINGS at a time (the oldest mapping closes), maps an evicted
    block again when it comes back, and every output has the values just written."""
    pytest.importorskip("cupy", reason="many_allocs uses cupy")
    ready(client, paths_server, "many_allocs")
    x = np.linspace(-1, 1, BLOCK_ELEMENTS, dtype=np.float32)
    before = copies(paths_server, "many_allocs")
    seen = []
    requests = ALLOCATIONS + 16
    for i in range(requests):
        got = infer(
            client, paths_server, "many_allocs",
            {"IN": x, "INDEX": np.array([i], dtype=np.int32)}, ["OUT"],
        )  # fmt: skip
        expected = x + np.float32(i)
        np.testing.assert_allclose(got["OUT"], expected, rtol=1e-6, err_msg=f"request {i}")
        if i in (9, ALLOCATIONS - 1, requests - 1):
            seen.append(ipc_handles(paths_server, "many_allocs"))
    assert seen == [10, MAX_MAPPINGS, MAX_MAPPINGS], (
        f"open IPC handles after 10, {ALLOCATIONS} and {requests} requests: {seen}"
    )
    counted = copies_since(paths_server, "many_allocs", before)
    assert counted == {"d2d": 0, "d2h": requests, "h2d": 0}, counted
    assert_no_staging(paths_server)


def test_gpu_inputs_of_requests_batched_into_one_execute_each_arrive_on_the_gpu(
    client: Any, paths_server: TritonServer, regions: Callable[[int], CudaRegion]
) -> None:
    """BATCHED requests with CUDA shared-memory inputs, sent at once, reach batched_view
    (FORCE_CPU_ONLY_INPUT_TENSORS "no", dynamic batching) in one execute call: each request's
    input arrives on the GPU, copied once by the backend into memory the stub maps (the
    client's region cannot be exported again), and its view goes back through gRPC with one
    device-to-host copy: d2d and d2h once per request, nothing else, each with its own
    values. (A request's input is one buffer: the python backend gathers no batch.)"""
    ready(client, paths_server, "batched_view")
    x = sample()
    sent = [(regions(x.nbytes), (x + 100 * i).reshape(1, -1)) for i in range(BATCHED)]
    names = ["OUT", "IN_IS_CPU", "BATCH"]
    before = copies(paths_server, "batched_view")
    requests = [request_parts({"IN": (region, array)}, names, {}) for region, array in sent]
    results = infer_at_once(client, paths_server, "batched_view", requests)
    batches = {}
    for i, result in enumerate(results):
        np.testing.assert_array_equal(result.as_numpy("OUT"), sent[i][1], err_msg=f"request {i}")
        assert result.as_numpy("IN_IS_CPU").tolist() == [[False]], f"request {i}"
        batches[i] = int(result.as_numpy("BATCH")[0][0])
    assert max(batches.values()) >= 2, f"the requests were never batched: {batches}"
    counted = copies_since(paths_server, "batched_view", before)
    assert counted == {"d2d": BATCHED, "d2h": BATCHED, "h2d": 0}, (counted, batches)
    assert_no_staging(paths_server)


def test_bls_gpu_outputs_go_to_host_memory_when_the_device_has_none_to_spare(
    client: Any, paths_server: TritonServer
) -> None:
    """bls_starved takes nearly all the device's free memory, then asks host_echo for its
    output with preferred_memory GPU: the backend's cuMemAlloc fails, it logs one warning
    naming the output, the callee, the driver's error and the fallback, and the output
    arrives in host memory with the right values (no copy anywhere). With the memory given
    back, the next call gets its output on the GPU again (the callee's host output copied
    host to device into it), and the caller passes that GPU tensor on as its own output
    (memory the backend lent: read under the backend's handle, one d2h into gRPC's buffer).
    The server stays up."""
    pytest.importorskip("cupy", reason="bls_starved uses cupy")
    models = ("bls_starved", "host_echo")
    ready(client, paths_server, *models)
    x = np.linspace(-1, 1, 4 << 20, dtype=np.float32)  # 16 MiB: more than starving leaves
    outputs = ["OUT", "BLS_OUT_IS_CPU", "LEFT"]

    def call(starve: bool) -> tuple[dict[str, np.ndarray], dict[str, dict[str, int]]]:
        before = {m: copies(paths_server, m) for m in models}
        inputs = {"IN": x, "STARVE": np.array([starve])}
        got = infer(client, paths_server, "bls_starved", inputs, outputs)
        np.testing.assert_array_equal(got["OUT"], x)
        return got, {m: copies_since(paths_server, m, before[m]) for m in models}

    got, counted = call(starve=True)
    left = int(got["LEFT"][0])
    assert got["BLS_OUT_IS_CPU"].tolist() == [True], (
        f"the BLS output was allocated on the GPU although starving left {left} bytes free "
        f"for a {x.nbytes}-byte output"
    )
    none = {"d2d": 0, "d2h": 0, "h2d": 0}
    assert counted == {"bls_starved": none, "host_echo": none}, counted
    warnings = [
        line
        for line in paths_server.log_text().splitlines()
        if "cuMemAlloc" in line and "host memory instead" in line
    ]
    assert len(warnings) == 1, f"{warnings}; {log_tail(paths_server)}"
    assert "'host_echo'" in warnings[0] and "CUDA_ERROR_OUT_OF_MEMORY" in warnings[0], warnings

    got, counted = call(starve=False)
    assert got["BLS_OUT_IS_CPU"].tolist() == [False], "the GPU preference was not served again"
    assert counted == {
        "bls_starved": {"d2d": 0, "d2h": 1, "h2d": 0},
        "host_echo": {"d2d": 0, "d2h": 0, "h2d": 1},
    }, counted
    assert paths_server.is_alive()


@pytest.mark.parametrize("model", ["staging_cupy", "staging_torch"])
def test_gpu_memory_cuda_ipc_cannot_share_is_staged_through_host_with_one_warning(
    client: Any, paths_server: TritonServer, regions: Callable[[int], CudaRegion], model: str
) -> None:
    """The model's GPU output lies in memory CUDA IPC cannot export (cupy's stream-ordered
    MemoryAsyncPool; torch with expandable_segments). The stub copies it into its shared
    memory and logs the staging warning once; the backend copies it host to device into the
    client's CUDA shared memory (one h2d per request, nothing else), and the values are
    right."""
    if model.endswith("cupy"):
        pytest.importorskip("cupy", reason="cupy is not installed on this GPU machine")
    x = sample()
    region_out = regions(x.nbytes)
    ready(client, paths_server, model)
    warned_before = paths_server.log_text().count(STAGING_WARNING)
    before = copies(paths_server, model)
    for i in range(N):
        y = x + i
        region_out.write(np.zeros_like(y))
        got = infer(
            client, paths_server, model, {"IN": y}, ["OUT"], {"OUT": (region_out, y.nbytes)}
        )
        np.testing.assert_allclose(got["OUT"], y * 2, rtol=1e-6)
    counted = copies_since(paths_server, model, before)
    assert counted == {"d2d": 0, "d2h": 0, "h2d": N}, (
        f"{model}: {counted}; expected the output staged by the stub (one h2d per request "
        "and nothing else); a d2d means CUDA IPC shared the allocator's memory after all"
    )

    def warned() -> int | None:
        count = paths_server.log_text().count(STAGING_WARNING)
        return count if count > warned_before else None

    try:
        now = wait_for(f"{model}'s staging warning", warned, timeout=10)
    except AssertionError as e:
        raise AssertionError(f"{e}; {log_tail(paths_server)}") from None
    lines = [line for line in paths_server.log_text().splitlines() if STAGING_WARNING in line]
    assert now == warned_before + 1, f"{model}: {now - warned_before} staging warnings: {lines}"
