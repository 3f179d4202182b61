"""tritonserver's gRPC inference service (``inference.GRPCInferenceService``, the protocol
tritonclient.grpc speaks), for the development server: health, metadata, configuration,
the repository index, ``ModelInfer`` and ``ModelStreamInfer`` (decoupled models stream
their responses as the model sends them). Needs grpcio and tritonclient[grpc]."""

from __future__ import annotations

import queue
import threading
from concurrent import futures
from typing import Any, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from .. import __version__
from ..testing.results import grpc_parameter, parameters_of
from ..utils.errors import ErrorCode
from .call import InferCall
from .errors import ServeError
from .http_server import EXTENSIONS, SERVER_NAME
from .inference import infer, stream
from .log_settings import LogSettings
from .models import ServedModels, metadata, output_types
from .shm_regions import CUDA_UNSUPPORTED, Place, Regions, place_of, required
from .statistics import model_statistics
from .tensors import FIXED, datatype_of, element_count, from_raw, to_raw

try:
    import grpc
    from google.protobuf import json_format
    from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc
except ImportError as e:  # pragma: no cover - the base install has no grpcio
    raise ImportError(
        "the development server's gRPC endpoint needs grpcio and tritonclient[grpc]: "
        "pip install 'tritonclient[grpc]' (or run it with --grpc-port -1 for HTTP only)"
    ) from e

#: tritonserver's answer to a decoupled model on ``ModelInfer`` (2.51, UNIMPLEMENTED).
DECOUPLED_ON_UNARY = "ModelInfer RPC doesn't support models with decoupled transaction policy"

STATUS = {
    ErrorCode.UNKNOWN: grpc.StatusCode.UNKNOWN,
    ErrorCode.INTERNAL: grpc.StatusCode.INTERNAL,
    ErrorCode.NOT_FOUND: grpc.StatusCode.NOT_FOUND,
    ErrorCode.INVALID_ARG: grpc.StatusCode.INVALID_ARGUMENT,
    ErrorCode.UNAVAILABLE: grpc.StatusCode.UNAVAILABLE,
    ErrorCode.UNSUPPORTED: grpc.StatusCode.UNIMPLEMENTED,
    ErrorCode.ALREADY_EXISTS: grpc.StatusCode.ALREADY_EXISTS,
    ErrorCode.CANCELLED: grpc.StatusCode.CANCELLED,
}

#: InferTensorContents' typed field for each datatype (clients that do not send raw bytes).
_CONTENTS = {
    "BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
    "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
    "UINT16": "uint_contents", "UINT32": "uint_contents", "UINT64": "uint64_contents",
    "FP32": "fp32_contents", "FP64": "fp64_contents", "BYTES": "bytes_contents",
}  # fmt: skip


def start_grpc(
    models: ServedModels,
    regions: Regions,
    host: str,
    port: int,
    log_settings: Optional[LogSettings] = None,
) -> Tuple[Any, int]:
    """A started ``grpc.Server`` and the port it listens on."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16, thread_name_prefix="devserver-grpc"),
        options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)],
    )
    service = _Service(models, regions, log_settings or LogSettings())
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(service, server)
    bound = server.add_insecure_port(f"{host}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen for gRPC on {host}:{port}")
    server.start()
    return server, bound


def parse_request(request: Any, model: str, regions: Optional[Regions] = None) -> InferCall:
    """A ``ModelInferRequest`` as the harness takes it (tritonserver's texts for what it
    refuses). Inputs in shared memory are read from ``regions``; the raw contents are the
    other inputs', in order."""
    places = [place_of(_parameters(t.parameters)) for t in request.inputs]
    raw: List[bytes] = list(request.raw_input_contents)
    carried = sum(place is None for place in places)
    if raw and len(raw) != carried:
        raise ServeError(
            f"expected {carried} raw input contents but got {len(raw)} for model '{model}'",
            ErrorCode.INVALID_ARG,
        )
    call = InferCall(inputs={}, request_id=request.id)
    contents = iter(raw)
    for tensor, place in zip(request.inputs, places):
        shape = [int(d) for d in tensor.shape]
        if place is not None:
            data = required(regions, tensor.name).read(place)
            array = from_raw(tensor.name, tensor.datatype, shape, data, model, request.id)
        elif raw:
            array = from_raw(tensor.name, tensor.datatype, shape, next(contents), model, request.id)
        else:
            array = _from_contents(tensor, shape, model)
        call.inputs[tensor.name] = array
    params = _parameters(request.parameters)
    call.set_parameters(params)
    for out in request.outputs:
        call.requested.append(out.name)
        place = place_of(_parameters(out.parameters))
        if place is not None:
            required(regions, out.name).check(place)
            call.shm_outputs[out.name] = place
    return call


def _parameters(parameters: Any) -> Dict[str, Any]:
    return {k: grpc_parameter(v) for k, v in parameters.items()}


def _from_contents(tensor: Any, shape: List[int], model: str) -> np.ndarray:
    field = _CONTENTS.get(tensor.datatype)
    if field is None:
        raise ServeError(
            f"{tensor.datatype} data of input '{tensor.name}' for model '{model}' must be "
            "sent as raw input contents",
            ErrorCode.INVALID_ARG,
        )
    values = list(getattr(tensor.contents, field))
    if len(values) != element_count(shape):
        raise ServeError(
            f"unexpected number of elements for input '{tensor.name}' for model '{model}': "
            f"{len(values)} for shape {shape}",
            ErrorCode.INVALID_ARG,
        )
    if tensor.datatype == "BYTES":
        array = np.empty(len(values), dtype=np.object_)
        array[:] = values
        return array.reshape(shape)
    return np.asarray(values, dtype=FIXED[tensor.datatype]).reshape(shape)


def response_message(
    name: str,
    version: Optional[int],
    request_id: str,
    outputs: Mapping[str, np.ndarray],
    declared: Mapping[str, str],
    final: Optional[bool] = None,
    shm: Tuple[Mapping[str, Place], Optional[Regions]] = ({}, None),
) -> Any:
    """The response; ``shm``: the outputs the client placed in its shared memory and the
    regions, where they are written (their raw contents stay empty, as tritonserver's)."""
    resp = service_pb2.ModelInferResponse(
        model_name=name, model_version=str(version or 1), id=request_id
    )
    places, regions = shm
    for out_name, array in outputs.items():
        datatype = datatype_of(array, declared.get(out_name))
        entry = resp.outputs.add(name=out_name, datatype=datatype)
        entry.shape.extend(int(d) for d in array.shape)
        raw = to_raw(array, datatype)
        place = places.get(out_name)
        if place is not None:
            required(regions, out_name).write(place, raw, out_name)
            raw = b""
        resp.raw_output_contents.append(raw)
    for key, value in parameters_of(outputs).items():
        _set_parameter(resp.parameters[key], value)
    if final is not None:
        resp.parameters["triton_final_response"].bool_param = final
    return resp


def _set_parameter(parameter: Any, value: Any) -> None:
    """One ``InferParameter`` from a response parameter (bool, int or str)."""
    if isinstance(value, bool):
        parameter.bool_param = value
    elif isinstance(value, int):
        parameter.int64_param = value
    else:
        parameter.string_param = str(value)


class _Streamed:
    """The bookkeeping of one ``ModelStreamInfer``: the responses of its requests in one
    queue (``None`` marks a request or the reader finishing), and when it is over."""

    def __init__(self) -> None:
        self.out: "queue.Queue[Any]" = queue.Queue()
        self.cancel = threading.Event()
        self._lock = threading.Lock()
        self._running = 0
        self._reading = True

    def started(self) -> None:
        with self._lock:
            self._running += 1

    def finished(self, reading: bool = False) -> None:
        with self._lock:
            if reading:
                self._reading = False
            else:
                self._running -= 1
        self.out.put(None)

    def over(self) -> bool:
        """No request left running and no more to come."""
        with self._lock:
            return not self._reading and self._running == 0

    def rest(self) -> Iterator[Any]:
        """Once over: the responses still queued behind the mark just read (every request
        put its responses before it finished, so they are all in the queue by now)."""
        while True:
            try:
                message = self.out.get_nowait()
            except queue.Empty:
                return
            if message is not None:
                yield message


class _Service(service_pb2_grpc.GRPCInferenceServiceServicer):  # type: ignore[misc]
    def __init__(self, models: ServedModels, regions: Regions, log_settings: LogSettings) -> None:
        self.models = models
        self.regions = regions
        self.log_settings = log_settings

    # ------------------------------------------------------------------ health, metadata

    def ServerLive(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC's names
        return service_pb2.ServerLiveResponse(live=True)

    def ServerReady(self, request: Any, context: Any) -> Any:  # noqa: N802
        return service_pb2.ServerReadyResponse(ready=self.models.all_ready)

    def ModelReady(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            self.models.get(request.name, request.version)
        except ServeError:
            return service_pb2.ModelReadyResponse(ready=False)
        return service_pb2.ModelReadyResponse(ready=True)

    def ServerMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        return service_pb2.ServerMetadataResponse(
            name=SERVER_NAME, version=__version__, extensions=EXTENSIONS
        )

    def ModelMetadata(self, request: Any, context: Any) -> Any:  # noqa: N802
        served = self._get(request.name, request.version, context)
        return json_format.ParseDict(metadata(served), service_pb2.ModelMetadataResponse())

    def ModelConfig(self, request: Any, context: Any) -> Any:  # noqa: N802
        served = self._get(request.name, request.version, context)
        config = json_format.ParseDict(
            served.config, model_config_pb2.ModelConfig(), ignore_unknown_fields=True
        )
        return service_pb2.ModelConfigResponse(config=config)

    def ModelStatistics(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            stats = model_statistics(self.models, request.name, request.version)
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
        return json_format.ParseDict(stats, service_pb2.ModelStatisticsResponse())

    def LogSettings(self, request: Any, context: Any) -> Any:  # noqa: N802
        changes = {key: getattr(value, value.WhichOneof("parameter_choice") or "bool_param")
                   for key, value in request.settings.items()}  # fmt: skip
        try:
            settings = self.log_settings.update(changes, grpc=True)
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
        resp = service_pb2.LogSettingsResponse()
        for key, value in settings.items():
            field = {bool: "bool_param", int: "uint32_param"}.get(type(value), "string_param")
            setattr(resp.settings[key], field, value)
        return resp

    # ------------------------------------------------------------------ shared memory

    def SystemSharedMemoryStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        resp = service_pb2.SystemSharedMemoryStatusResponse()
        try:
            for region in self.regions.status(request.name):
                resp.regions[region["name"]].CopyFrom(
                    json_format.ParseDict(
                        region, service_pb2.SystemSharedMemoryStatusResponse.RegionStatus()
                    )
                )
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
        return resp

    def SystemSharedMemoryRegister(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            self.regions.register(request.name, request.key, request.offset, request.byte_size)
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
        return service_pb2.SystemSharedMemoryRegisterResponse()

    def SystemSharedMemoryUnregister(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.regions.unregister(request.name)
        return service_pb2.SystemSharedMemoryUnregisterResponse()

    def CudaSharedMemoryStatus(self, request: Any, context: Any) -> Any:  # noqa: N802
        return service_pb2.CudaSharedMemoryStatusResponse()  # no GPU: none registered

    def CudaSharedMemoryRegister(self, request: Any, context: Any) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.UNIMPLEMENTED, CUDA_UNSUPPORTED)

    def CudaSharedMemoryUnregister(self, request: Any, context: Any) -> Any:  # noqa: N802
        return service_pb2.CudaSharedMemoryUnregisterResponse()

    def RepositoryIndex(self, request: Any, context: Any) -> Any:  # noqa: N802
        resp = service_pb2.RepositoryIndexResponse()
        for entry in self.models.index():
            resp.models.add(**entry)
        return resp

    def RepositoryModelLoad(self, request: Any, context: Any) -> Any:  # noqa: N802
        try:
            self.models.load_model(request.model_name)
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
        return service_pb2.RepositoryModelLoadResponse()

    def RepositoryModelUnload(self, request: Any, context: Any) -> Any:  # noqa: N802
        self.models.unload_model(request.model_name)
        return service_pb2.RepositoryModelUnloadResponse()

    # ------------------------------------------------------------------ inference

    def ModelInfer(self, request: Any, context: Any) -> Any:  # noqa: N802
        served = self._get(request.model_name, request.model_version, context)
        try:
            if served.decoupled:
                raise ServeError(DECOUPLED_ON_UNARY, ErrorCode.UNSUPPORTED)
            call = parse_request(request, served.name, self.regions)
            outputs = infer(served, call)
            return response_message(
                served.name, served.version, call.request_id, outputs, output_types(served),
                shm=(call.shm_outputs, self.regions),
            )  # fmt: skip
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)

    def ModelStreamInfer(self, requests: Iterator[Any], context: Any) -> Iterator[Any]:  # noqa: N802
        """The requests of a stream run side by side, as in tritonserver (a decoupled model
        may serve many streams from one instance), their responses interleaved as they
        come; when the client cancels the stream or goes away, every request still running
        is cancelled (its ``is_cancelled()`` turns true)."""
        streamed = _Streamed()
        context.add_callback(streamed.cancel.set)  # the RPC ended: cancelled, or done

        def run(request: Any) -> None:
            try:
                for message in self._stream_one(request, streamed.cancel):
                    streamed.out.put(message)
            finally:
                streamed.finished()

        def read() -> None:
            try:
                for request in requests:
                    streamed.started()
                    threading.Thread(target=run, args=(request,), daemon=True).start()
            except Exception:  # noqa: BLE001 - the client went away while sending
                pass
            finally:
                streamed.finished(reading=True)

        threading.Thread(target=read, name="devserver-grpc-stream", daemon=True).start()
        while True:
            message = streamed.out.get()
            if message is None:
                if streamed.over():
                    yield from streamed.rest()
                    return
                continue
            yield message

    def _stream_one(self, request: Any, cancel: threading.Event) -> Iterator[Any]:
        """One request of a stream: its responses, then (when the client asked for it with
        ``triton_enable_empty_final_response``) an empty one flagged final, as tritonserver
        sends them; an error goes in ``error_message``."""
        empty_final = grpc_parameter(request.parameters["triton_enable_empty_final_response"]) \
            if "triton_enable_empty_final_response" in request.parameters else False  # fmt: skip
        head = {"model_name": request.model_name, "model_version": request.model_version}
        try:
            served = self.models.get(request.model_name, request.model_version)
            call = parse_request(request, served.name, self.regions)
        except ServeError as e:
            yield service_pb2.ModelStreamInferResponse(
                error_message=e.message,
                infer_response=service_pb2.ModelInferResponse(id=request.id, **head),
            )
            return
        declared = output_types(served)
        decoupled = served.decoupled
        for outputs, error in stream(served, call, cancel):
            if error is not None:
                yield service_pb2.ModelStreamInferResponse(
                    error_message=error.message,
                    infer_response=service_pb2.ModelInferResponse(id=request.id, **head),
                )
                return
            message = response_message(
                served.name, served.version, call.request_id, outputs or {}, declared,
                final=not decoupled, shm=(call.shm_outputs, self.regions),
            )  # fmt: skip
            yield service_pb2.ModelStreamInferResponse(infer_response=message)
        if decoupled and empty_final:
            yield service_pb2.ModelStreamInferResponse(
                infer_response=response_message(
                    served.name, served.version, call.request_id, {}, declared, final=True
                )
            )

    def _get(self, name: str, version: str, context: Any) -> Any:
        try:
            return self.models.get(name, version)
        except ServeError as e:
            context.abort(STATUS[e.code], e.message)
