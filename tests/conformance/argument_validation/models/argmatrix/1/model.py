"""The argument matrix: every public callable of pb_utils x each of its arguments x every
value of matrix_common.VALUES, run for real; execute returns, for PART "<row>",
the row's outcome table as JSON ({"<callable>(<argument>=<value>)": "<outcome>"}), and for
PART "" the list of rows.

Calls with side effects go to models of this repository: BLS to argtarget, model control
on argvictim (reloaded after each unload), the response sender through argprobe, metric
families under names of their own.
"""

import asyncio
import importlib.util
import json
import pathlib

import numpy as np

import triton_python_backend_utils as pb_utils


def _common(repository):
    path = pathlib.Path(repository) / "1" / "matrix_common.py"
    spec = importlib.util.spec_from_file_location("argmatrix_common", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Row:
    """One callable: ``call(*positional, **keywords)`` with the valid arguments in
    ``valid`` (name -> value); ``keywords`` names the ones passed by keyword. A ``call``
    that wraps a method passes its arguments on as they came (by position or keyword)."""

    def __init__(self, name, call, valid, keywords=(), observe=None):
        self.name = name
        self.call = call
        self.valid = valid
        self.keywords = set(keywords)
        self.observe = observe

    def invoke(self, arguments):
        positional = [v for k, v in arguments.items() if k not in self.keywords]
        named = {k: v for k, v in arguments.items() if k in self.keywords}
        return self.call(*positional, **named)


def _int32(*values):
    return np.array(values or [1, 2], dtype=np.int32)


def _tensor(name="INPUT0"):
    return pb_utils.Tensor(name, _int32())


def _bls_request(**overrides):
    arguments = dict(inputs=[_tensor()], requested_output_names=["OUTPUT0"], model_name="argtarget")
    arguments.update(overrides)
    return pb_utils.InferenceRequest(**arguments)


def _request_state(r):
    return [
        r.request_id(),
        repr(r.correlation_id()),
        r.flags(),
        r.timeout(),
        sorted(r.requested_output_names()),
        [t.name() for t in r.inputs()],
        json.loads(r.parameters()),
    ]


def _exec_state(result):
    if isinstance(result, pb_utils.InferenceResponse):
        return ["response", result.has_error()]
    return ["iterator", [r.has_error() for r in result]]


def _async_exec(request, *args, **kwargs):
    async def run():
        return await request.async_exec(*args, **kwargs)

    return asyncio.run(run())


def _config():
    return {
        "name": "m",
        "max_batch_size": 0,
        "input": [{"name": "I", "data_type": "TYPE_FP32", "dims": [1]}],
        "output": [{"name": "O", "data_type": "TYPE_FP32", "dims": [1]}],
    }


def _model_config(change):
    """A ModelConfig over a fresh config, changed by ``change``; the resulting dict."""
    config = pb_utils.ModelConfig(json.dumps(_config()))
    change(config)
    return config.as_dict()


def _reload_victim():
    try:
        pb_utils.load_model("argvictim")
    except pb_utils.TritonModelException:
        pass


def _unload(*args, **kwargs):
    try:
        return pb_utils.unload_model(*args, **kwargs)
    finally:
        _reload_victim()


def _send_through_probe(common):
    """The response sender's rows: argprobe varies the argument on its own sender."""

    def call_probe(case):
        tensor = pb_utils.Tensor("CASE", np.array([case.encode()], dtype=object))
        request = pb_utils.InferenceRequest(
            model_name="argprobe", inputs=[tensor], requested_output_names=["OUTCOME"]
        )
        texts = []
        for response in request.exec(decoupled=True):
            if response.has_error():
                raise pb_utils.TritonModelException(response.error().message())
            for out in response.output_tensors():
                texts.append(out.as_numpy()[0].decode())
        return texts

    table = {}
    for argument in ("response", "flags"):
        for value_name in common.VALUES:
            call_probe(f"{argument}|{value_name}")
            report = call_probe("report")
            key = f"InferenceResponseSender.send({argument}={value_name})"
            table[key] = report[-1] if report else "probe sent no report"
    return table


# Metric families outlive their metrics (deleting a family invalidates its metrics).
FAMILIES = []


def rows(request):
    Tensor = pb_utils.Tensor
    if not FAMILIES:
        kinds = pb_utils.MetricFamily
        FAMILIES.append(kinds("argmatrix_counter", "c", kinds.COUNTER))
        FAMILIES.append(kinds("argmatrix_gauge", "g", kinds.GAUGE))
        FAMILIES.append(kinds("argmatrix_hist", "h", kinds.HISTOGRAM))
    counter, gauge, histogram = FAMILIES
    logger = pb_utils.Logger
    names = lambda t: [t.name(), t.shape()]  # noqa: E731
    return [
        Row("Tensor", Tensor, {"name": "T", "array": _int32()}, observe=names),
        Row(
            "Tensor.from_dlpack", Tensor.from_dlpack, {"name": "T", "obj": _tensor()}, observe=names
        ),
        Row(
            "Tensor.__dlpack__",
            lambda *a, **kw: _tensor().__dlpack__(*a, **kw),
            {"stream": None},
            ["stream"],
        ),
        Row(
            "TritonError",
            pb_utils.TritonError,
            {"message": "m", "code": pb_utils.TritonError.INTERNAL},
            observe=lambda e: [e.message(), int(e.code())],
        ),
        Row(
            "InferenceResponse",
            pb_utils.InferenceResponse,
            # no `parameters`: the 24.10 original has none (upstream HEAD added it)
            {"output_tensors": [_tensor("OUTPUT0")], "error": None},
            ["output_tensors", "error"],
            observe=lambda r: [len(r.output_tensors()), r.has_error()],
        ),
        Row(
            "InferenceRequest",
            pb_utils.InferenceRequest,
            {
                "request_id": "r",
                "correlation_id": 7,
                "inputs": [_tensor()],
                "requested_output_names": ["OUTPUT0"],
                "model_name": "argtarget",
                "model_version": -1,
                "flags": 0,
                "timeout": 0,
                "preferred_memory": pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0),
                "trace": request.trace(),
                "parameters": {"k": "v"},
            },
            [
                "request_id",
                "correlation_id",
                "inputs",
                "requested_output_names",
                "model_name",
                "model_version",
                "flags",
                "timeout",
                "preferred_memory",
                "trace",
                "parameters",
            ],
            observe=_request_state,
        ),
        Row(
            "InferenceRequest.exec",
            lambda *a, **kw: _bls_request().exec(*a, **kw),
            {"decoupled": False},
            ["decoupled"],
            observe=_exec_state,
        ),
        Row(
            "InferenceRequest.async_exec",
            lambda *a, **kw: _async_exec(_bls_request(), *a, **kw),
            {"decoupled": False},
            ["decoupled"],
            observe=_exec_state,
        ),
        Row(
            "InferenceRequest.set_flags",
            lambda *a, **kw: _bls_request().set_flags(*a, **kw),
            {"flags": 1},
        ),
        Row(
            "InferenceRequest.set_release_flags",
            lambda *a, **kw: _bls_request().set_release_flags(*a, **kw),
            {"flags": pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL},
        ),
        Row(
            "PreferredMemory",
            pb_utils.PreferredMemory,
            {"preferred_memory_type": pb_utils.TRITONSERVER_MEMORY_CPU, "preferred_device_id": 0},
        ),
        Row("Logger.log", logger.log, {"message": "matrix", "level": logger.INFO}),
        Row("Logger.log_info", logger.log_info, {"message": "matrix"}),
        Row("Logger.log_warn", logger.log_warn, {"message": "matrix"}),
        Row("Logger.log_error", logger.log_error, {"message": "matrix"}),
        Row("Logger.log_verbose", logger.log_verbose, {"message": "matrix"}),
        Row(
            "MetricFamily",
            pb_utils.MetricFamily,
            {"name": "argmatrix_family", "description": "d", "kind": pb_utils.MetricFamily.GAUGE},
        ),
        Row(
            "MetricFamily.Metric",
            counter.Metric,
            {"labels": {"k": "v"}, "buckets": None},
            ["labels", "buckets"],
        ),
        Row(
            "MetricFamily.Metric(histogram)",
            histogram.Metric,
            {"labels": {"k": "v"}, "buckets": [1.0, 2.0]},
            ["labels", "buckets"],
        ),
        Row("Metric.increment", counter.Metric(labels={"k": "v"}).increment, {"value": 1.0}),
        Row("Metric.set", gauge.Metric(labels={"k": "v"}).set, {"value": 1.0}),
        Row(
            "Metric.observe",
            histogram.Metric(labels={"k": "v"}, buckets=[1.0]).observe,
            {"value": 1.0},
        ),
        Row(
            "load_model",
            pb_utils.load_model,
            {"model_name": "argvictim", "config": "", "files": None},
            ["model_name", "config", "files"],
        ),
        Row(
            "unload_model",
            _unload,
            {"model_name": "argvictim", "unload_dependents": False},
            ["model_name", "unload_dependents"],
        ),
        Row(
            "is_model_ready",
            pb_utils.is_model_ready,
            {"model_name": "argtarget", "model_version": "1"},
            ["model_name", "model_version"],
            observe=lambda ready: ready,
        ),
        Row(
            "get_input_tensor_by_name",
            pb_utils.get_input_tensor_by_name,
            {"inference_request": request, "name": "PART"},
            observe=lambda t: None if t is None else t.name(),
        ),
        Row(
            "get_output_tensor_by_name",
            pb_utils.get_output_tensor_by_name,
            {"inference_response": pb_utils.InferenceResponse([_tensor("O")]), "name": "O"},
            observe=lambda t: None if t is None else t.name(),
        ),
        Row(
            "triton_string_to_numpy",
            pb_utils.triton_string_to_numpy,
            {"triton_type_string": "TYPE_INT32"},
            observe=lambda t: np.dtype(t).name,
        ),
        Row(
            "triton_to_numpy_type",
            pb_utils.triton_to_numpy_type,
            {"data_type": 8},
            observe=lambda t: None if t is None else np.dtype(t).name,
        ),
        Row(
            "numpy_to_triton_type",
            pb_utils.numpy_to_triton_type,
            {"data_type": np.int32},
            observe=lambda code: code,
        ),
        Row(
            "deserialize_bytes_tensor",
            pb_utils.deserialize_bytes_tensor,
            {"encoded_tensor": b"\x01\x00\x00\x00a"},
            observe=lambda array: array.tolist(),
        ),
        Row(
            "get_input_config_by_name",
            pb_utils.get_input_config_by_name,
            {"model_config": _config(), "name": "I"},
            observe=lambda entry: entry,
        ),
        Row(
            "get_output_config_by_name",
            pb_utils.get_output_config_by_name,
            {"model_config": _config(), "name": "O"},
            observe=lambda entry: entry,
        ),
        Row(
            "using_decoupled_model_transaction_policy",
            pb_utils.using_decoupled_model_transaction_policy,
            {"model_config": _config()},
            observe=lambda decoupled: decoupled,
        ),
        Row(
            "ModelConfig",
            pb_utils.ModelConfig,
            {"model_config": json.dumps(_config())},
            observe=lambda config: config.as_dict(),
        ),
        Row(
            "ModelConfig.set_max_batch_size",
            lambda *a, **kw: _model_config(lambda c: c.set_max_batch_size(*a, **kw)),
            {"max_batch_size": 4},
            observe=lambda config: config,
        ),
        Row(
            "ModelConfig.add_input",
            lambda *a, **kw: _model_config(lambda c: c.add_input(*a, **kw)),
            {"input": {"name": "J", "data_type": "TYPE_FP32", "dims": [1]}},
            observe=lambda config: config,
        ),
        Row(
            "ModelConfig.add_output",
            lambda *a, **kw: _model_config(lambda c: c.add_output(*a, **kw)),
            {"output": {"name": "P", "data_type": "TYPE_FP32", "dims": [1]}},
            observe=lambda config: config,
        ),
        Row(
            "ModelConfig.set_model_transaction_policy",
            lambda *a, **kw: _model_config(lambda c: c.set_model_transaction_policy(*a, **kw)),
            {"transaction_policy_dict": {"decoupled": False}},
            observe=lambda config: config,
        ),
        Row(
            "serialize_byte_tensor",
            pb_utils.serialize_byte_tensor,
            {"input_tensor": np.array([b"a"], dtype=object)},
            observe=lambda b: b,
        ),
    ]


SENDER_ROW = "InferenceResponseSender.send"


def run_matrix(request, common, part):
    """PART "" lists the rows; PART "<row>" runs that row (one request per row keeps each
    execute short, and a crash of one row from taking the others with it)."""
    table_rows = rows(request)
    if not part:
        return [row.name for row in table_rows] + [SENDER_ROW]
    if part == SENDER_ROW:
        return _send_through_probe(common)
    table = {}
    for row in table_rows:
        if row.name != part:
            continue
        # How the valid arguments may be passed: all by position, all by keyword (the
        # binding's argument names are part of the contract).
        names = list(row.valid)
        table[f"{row.name}(<all positional>)"] = common.outcome(
            lambda row=row: row.call(*row.valid.values()), row.observe
        )
        table[f"{row.name}(<all keywords: {', '.join(names)}>)"] = common.outcome(
            lambda row=row: row.call(**row.valid), row.observe
        )
        for argument, valid in row.valid.items():
            for value_name, make in common.VALUES.items():
                arguments = dict(row.valid)
                arguments[argument] = make(valid)
                key = f"{row.name}({argument}={value_name})"
                call = lambda row=row, arguments=arguments: row.invoke(arguments)  # noqa: E731
                table[key] = common.outcome(call, row.observe)
    return table


class TritonPythonModel:
    def initialize(self, args):
        self.common = _common(args["model_repository"])

    def execute(self, requests):
        responses = []
        for request in requests:
            part = pb_utils.get_input_tensor_by_name(request, "PART").as_numpy()[0].decode()
            table = run_matrix(request, self.common, part)
            text = json.dumps(table, indent=0, sort_keys=True)
            encoded = np.array([text.encode()], dtype=object)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("TABLE", encoded)]))
        return responses
