"""The development server's system shared-memory extension against tritonserver 2.51 with our
backend: regions registered through tritonclient, inputs read from them and outputs written
into them (alone and mixed with tensors in the request), over HTTP and gRPC; the status
answers, and every refusal (a region registered twice, a key that does not exist, ranges
outside a region, an unknown region, an output region too small, binary data asked for an
output in shared memory) with the same status and text."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from typing import Any, Callable, Dict, List, Tuple

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from http_exchange import exchange
from side_by_side import MODES, side_by_side
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException

from integration_support import EXAMPLES_REPOSITORY
from pybackend.devserver import DevServer

A = np.arange(4, dtype=np.float32)
B = np.full(4, 0.5, dtype=np.float32)
SIZE = 64  # bytes of each region: INPUT0 at 0, INPUT1 at 16; OUTPUT0 at 0, OUTPUT1 at 32


@pytest.fixture(scope="module")
def keys() -> Iterator[Dict[str, Any]]:
    """Two POSIX shared-memory objects (names unique to this run): inputs and outputs."""
    tag = f"{os.getpid()}_{uuid.uuid4().hex[:8]}"
    made = {}
    for role in ("in", "out", "spare"):  # spare: never registered
        key = f"/pbtest_{role}_{tag}"
        made[role] = (key, shm.create_shared_memory_region(f"{role}_{tag}", key, SIZE))
    shm.set_shared_memory_region(made["in"][1], [A, B])
    yield made
    for _, handle in made.values():
        shm.destroy_shared_memory_region(handle)


@pytest.fixture(scope="module", params=MODES)
def servers(request: pytest.FixtureRequest, keys: Dict[str, Any]) -> Iterator[Tuple[Any, Any]]:
    with side_by_side(EXAMPLES_REPOSITORY, request.param) as (real, dev):
        for server in (real, dev):
            client = httpclient.InferenceServerClient(server.http_url)
            for role in ("in", "out"):
                client.register_system_shared_memory(role, keys[role][0], SIZE)
            client.close()
        yield real, dev


def _outputs(keys: Dict[str, Any]) -> np.ndarray:
    return shm.get_contents_as_numpy(keys["out"][1], np.float32, [SIZE // 4])


def _clear(keys: Dict[str, Any]) -> None:
    shm.set_shared_memory_region(keys["out"][1], [np.zeros(SIZE // 4, np.float32)])


def _infer(module: Any, server: Any, shm_inputs: bool, shm_outputs: bool) -> Dict[str, Any]:
    """add_sub through tritonclient with INPUT0 and OUTPUT0 in shared memory (as asked),
    INPUT1 and OUTPUT1 in the request and response."""
    url = server.http_url if module is httpclient else server.grpc_url
    client = module.InferenceServerClient(url)
    try:
        inputs = [module.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
        if shm_inputs:
            inputs[0].set_shared_memory("in", 16)
        else:
            inputs[0].set_data_from_numpy(A)
        inputs[1].set_data_from_numpy(B)
        outputs = [module.InferRequestedOutput(n) for n in ("OUTPUT0", "OUTPUT1")]
        if shm_outputs:
            outputs[0].set_shared_memory("out", 16)
        result = client.infer("add_sub", inputs, outputs=outputs)
        return {
            # An output in shared memory is listed without data (as_numpy has none to read).
            "OUTPUT0": None if shm_outputs else result.as_numpy("OUTPUT0").tolist(),
            "OUTPUT1": result.as_numpy("OUTPUT1").tolist(),
            "listed": result.get_output("OUTPUT0") is not None,
        }
    finally:
        client.close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
@pytest.mark.parametrize("shm_inputs, shm_outputs", [(True, True), (True, False), (False, True)])
def test_inference_through_shared_memory(
    protocol: str,
    shm_inputs: bool,
    shm_outputs: bool,
    servers: Tuple[Any, Any],
    keys: Dict[str, Any],
) -> None:
    module = httpclient if protocol == "http" else grpcclient
    seen: List[Any] = []
    for server in servers:
        _clear(keys)
        answer = _infer(module, server, shm_inputs, shm_outputs)
        seen.append((answer, _outputs(keys).tolist()))
    (real, real_region), (dev, dev_region) = seen
    assert dev == real
    assert dev_region == real_region
    assert real["OUTPUT1"] == (A - B).tolist() and real["listed"]
    if shm_outputs:  # in the region, not in the response
        assert real_region[:4] == (A + B).tolist()
    else:
        assert real["OUTPUT0"] == (A + B).tolist()


def _body(mutate: Callable[[Dict[str, Any]], None] = lambda body: None) -> bytes:
    def tensor_in(name: str, offset: int) -> Dict[str, Any]:
        params = {"shared_memory_region": "in", "shared_memory_byte_size": 16}
        if offset:
            params["shared_memory_offset"] = offset
        return {"name": name, "datatype": "FP32", "shape": [4], "parameters": params}

    body = {
        "inputs": [tensor_in("INPUT0", 0), tensor_in("INPUT1", 16)],
        "outputs": [
            {
                "name": "OUTPUT0",
                "parameters": {"shared_memory_region": "out", "shared_memory_byte_size": 16},
            },
            {"name": "OUTPUT1"},
        ],
    }
    mutate(body)
    return json.dumps(body).encode()


def _in0(**params: Any) -> Callable[[Dict[str, Any]], None]:
    return lambda body: body["inputs"][0]["parameters"].update(params)


def _out0(**params: Any) -> Callable[[Dict[str, Any]], None]:
    return lambda body: body["outputs"][0]["parameters"].update(params)


def _register(name: str, key: str, size: int) -> Tuple[str, str, bytes]:
    body = json.dumps({"key": key, "offset": 0, "byte_size": size}).encode()
    return "POST", f"/v2/systemsharedmemory/region/{name}/register", body


INFER = "/v2/models/add_sub/infer"
EXCHANGES: Dict[str, Callable[[Dict[str, Any]], Tuple[str, str, bytes]]] = {
    "status of all": lambda k: ("GET", "/v2/systemsharedmemory/status", b""),
    "status of one": lambda k: ("GET", "/v2/systemsharedmemory/region/in/status", b""),
    "status of an unknown region": lambda k: (
        "GET", "/v2/systemsharedmemory/region/nope/status", b""
    ),
    "registered twice": lambda k: _register("in", k["in"][0], SIZE),
    "a key that does not exist": lambda k: _register("bad", "/pbtest_no_such_key", SIZE),
    "larger than the object": lambda k: _register("big", k["spare"][0], SIZE * 100),
    "unregister an unknown region": lambda k: (
        "POST", "/v2/systemsharedmemory/region/nope/unregister", b""
    ),
    "cuda status": lambda k: ("GET", "/v2/cudasharedmemory/status", b""),
    "infer": lambda k: ("POST", INFER, _body()),
    "unknown input region": lambda k: ("POST", INFER, _body(_in0(shared_memory_region="zz"))),
    "input past the region": lambda k: ("POST", INFER, _body(_in0(shared_memory_offset=60))),
    "input size off its shape": lambda k: (
        "POST", INFER, _body(_in0(shared_memory_byte_size=12))
    ),
    "unknown output region": lambda k: ("POST", INFER, _body(_out0(shared_memory_region="zz"))),
    "output past the region": lambda k: ("POST", INFER, _body(_out0(shared_memory_offset=60))),
    "output region too small": lambda k: (
        "POST", INFER, _body(_out0(shared_memory_byte_size=8))
    ),
    "output also binary": lambda k: ("POST", INFER, _body(_out0(binary_data=True))),
    # Not compared: a registered key under another name. tritonserver 2.51 answers it 200 or
    # 500 ("Invalid shared memory region") from one server process to the next (it fstat()s
    # a descriptor of the key's first registration; docs/devserver.md), so no answer of the
    # development server can be held to it; its own answer is pinned below.
}  # fmt: skip


@pytest.mark.parametrize("what", list(EXCHANGES))
def test_http_answers_alike(what: str, servers: Tuple[Any, Any], keys: Dict[str, Any]) -> None:
    method, path, body = EXCHANGES[what](keys)
    answers = []
    for server in servers:
        _clear(keys)
        answers.append((exchange(server.http_url, method, path, body), _outputs(keys).tolist()))
    assert answers[1] == answers[0]


def _rpc(server: Any, method: str, request: Any) -> Any:
    channel = grpc.insecure_channel(server.grpc_url)
    try:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        try:
            return getattr(stub, method)(request)
        except grpc.RpcError as e:
            return e.code(), e.details()
    finally:
        channel.close()


def _grpc_infer(mutate: Callable[[Any], None]) -> Any:
    request = service_pb2.ModelInferRequest(model_name="add_sub")
    for i, name in enumerate(["INPUT0", "INPUT1"]):
        tensor = request.inputs.add(name=name, datatype="FP32", shape=[4])
        tensor.parameters["shared_memory_region"].string_param = "in"
        tensor.parameters["shared_memory_byte_size"].int64_param = 16
        tensor.parameters["shared_memory_offset"].int64_param = 16 * i
    out = request.outputs.add(name="OUTPUT0")
    out.parameters["shared_memory_region"].string_param = "out"
    out.parameters["shared_memory_byte_size"].int64_param = 16
    request.outputs.add(name="OUTPUT1")
    mutate(request)
    return request


def _set(tensor: Any, key: str, value: Any) -> None:
    field = "string_param" if isinstance(value, str) else "int64_param"
    setattr(tensor.parameters[key], field, value)


RPCS: Dict[str, Callable[[Dict[str, Any]], Tuple[str, Any]]] = {
    "status of all": lambda k: (
        "SystemSharedMemoryStatus", service_pb2.SystemSharedMemoryStatusRequest()
    ),
    "status of an unknown region": lambda k: (
        "SystemSharedMemoryStatus", service_pb2.SystemSharedMemoryStatusRequest(name="nope")
    ),
    "registered twice": lambda k: (
        "SystemSharedMemoryRegister",
        service_pb2.SystemSharedMemoryRegisterRequest(name="in", key=k["in"][0], byte_size=SIZE),
    ),
    "a key that does not exist": lambda k: (
        "SystemSharedMemoryRegister",
        service_pb2.SystemSharedMemoryRegisterRequest(name="x", key="/pbtest_none", byte_size=8),
    ),
    "infer": lambda k: ("ModelInfer", _grpc_infer(lambda r: None)),
    "unknown input region": lambda k: (
        "ModelInfer", _grpc_infer(lambda r: _set(r.inputs[0], "shared_memory_region", "zz"))
    ),
    "output past the region": lambda k: (
        "ModelInfer", _grpc_infer(lambda r: _set(r.outputs[0], "shared_memory_offset", 60))
    ),
    "output region too small": lambda k: (
        "ModelInfer", _grpc_infer(lambda r: _set(r.outputs[0], "shared_memory_byte_size", 8))
    ),
}  # fmt: skip


def _comparable(answer: Any) -> Any:
    if isinstance(answer, tuple):
        return answer
    if isinstance(answer, service_pb2.ModelInferResponse):
        answer.ClearField("id")
    return answer.SerializeToString(deterministic=True)


@pytest.mark.parametrize("what", list(RPCS))
def test_grpc_answers_alike(what: str, servers: Tuple[Any, Any], keys: Dict[str, Any]) -> None:
    method, request = RPCS[what](keys)
    answers = []
    for server in servers:
        _clear(keys)
        answers.append((_comparable(_rpc(server, method, request)), _outputs(keys).tolist()))
    assert answers[1] == answers[0]


def test_unregistered_regions_are_gone(keys: Dict[str, Any]) -> None:
    with DevServer(EXAMPLES_REPOSITORY, grpc_port=0, echo_logs=False) as dev:
        client = httpclient.InferenceServerClient(dev.http_url)
        try:
            client.register_system_shared_memory("in", keys["in"][0], SIZE)
            client.register_system_shared_memory("out", keys["out"][0], SIZE)
            client.unregister_system_shared_memory("in")
            assert [r["name"] for r in client.get_system_shared_memory_status()] == ["out"]
            client.unregister_system_shared_memory()
            assert client.get_system_shared_memory_status() == []
        finally:
            client.close()


def test_a_region_shrunk_after_registering_is_refused_not_fatal() -> None:
    # Reading pages past a shrunk object's end would kill the server with SIGBUS.
    key = f"/pbtest_shrink_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region("shrink", key, 2 * 4096)
    try:
        shm.set_shared_memory_region(handle, [np.ones(2048, np.float32)])
        with DevServer(EXAMPLES_REPOSITORY, echo_logs=False) as dev:
            client = httpclient.InferenceServerClient(dev.http_url)
            try:
                client.register_system_shared_memory("r", key, 2 * 4096)
                os.truncate(os.path.join("/dev/shm", key.lstrip("/")), 16)
                inputs = [httpclient.InferInput(n, [4], "FP32") for n in ("INPUT0", "INPUT1")]
                inputs[0].set_shared_memory("r", 16, offset=4096)
                inputs[1].set_data_from_numpy(B)
                with pytest.raises(InferenceServerException, match="smaller than when it was"):
                    client.infer("add_sub", inputs)
                inputs[0].set_data_from_numpy(A)  # the server is still there
                result = client.infer("add_sub", inputs)
                assert result.as_numpy("OUTPUT0").tolist() == (A + B).tolist()
            finally:
                client.close()
    finally:
        shm.destroy_shared_memory_region(handle)


def test_a_registered_key_under_another_name_is_registered() -> None:
    # Not compared with tritonserver, whose answer varies (see EXCHANGES): the development
    # server registers it, a second view of the same object.
    key = f"/pbtest_twice_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    handle = shm.create_shared_memory_region("twice", key, 64)
    try:
        with DevServer(EXAMPLES_REPOSITORY, echo_logs=False) as dev:
            client = httpclient.InferenceServerClient(dev.http_url)
            try:
                client.register_system_shared_memory("first", key, 64)
                client.register_system_shared_memory("again", key, 32)
                regions = client.get_system_shared_memory_status()
                assert {r["name"]: r["byte_size"] for r in regions} == {"first": 64, "again": 32}
                client.unregister_system_shared_memory()
            finally:
                client.close()
    finally:
        shm.destroy_shared_memory_region(handle)
