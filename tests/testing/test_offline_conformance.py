"""UV-23: the offline runs and the server run give identical results on the conformance
suite's models. Each case goes to the model in-process (ModelHarness), in a real stub
process (StubModel) and through tritonserver with our backend (ServerModel, whose answers
tests/conformance holds against the original backend); the three outcomes (every output
bit for bit with its dtype and shape, or the error text) must be equal."""

from __future__ import annotations

import contextlib
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pybackend.testing import (
    InferError,
    ModelHarness,
    OutputMismatchWarning,
    ServerModel,
    StubModel,
)

CONFORMANCE = Path(__file__).resolve().parents[1] / "conformance"


def s(*words: str) -> np.ndarray:
    return np.array([w.encode() for w in words], np.object_)


def i32(*values: int) -> np.ndarray:
    return np.array(values, np.int32)


def sequence_cases(
    x: np.ndarray, string_ids: bool = True
) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """One sequence through its START, a middle request and END, then the requests the
    sequence batcher refuses: no correlation id, a sequence never started, one that ended."""
    steps = [
        ("start", {"sequence_id": 42, "sequence_start": True}),
        ("middle", {"sequence_id": 42}),
        ("end", {"sequence_id": 42, "sequence_end": True}),
        ("no id", {}),
        ("never started", {"sequence_id": 7}),
        ("after its end", {"sequence_id": 42}),
        (
            "start and end at once",
            {"sequence_id": 2**40, "sequence_start": True, "sequence_end": True},
        ),
    ]
    if string_ids:
        steps.append(("string id", {"sequence_id": "seq-\u00e9", "sequence_start": True}))
    return [(name, {"IN": x}, kwargs) for name, kwargs in steps]


def identity_cases() -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    values: dict[str, np.ndarray] = {
        "BOOL": np.array([[True, False, True], [False, False, True]]),
        "STRING": np.array([[b"", b"a\x00b", b"\xff\xfe"], [b"tail\x00", b"x" * 300, b"h"]]),
        "FP16": np.array([[np.nan, np.inf, -0.0], [1.5, 65504.0, -np.inf]], np.float16),
        "FP32": np.array([[np.nan, np.inf, -0.0], [1.5, 3.4e38, -np.inf]], np.float32),
        "FP64": np.array([[np.nan, np.inf, -0.0], [1.5, 1e308, -np.inf]], np.float64),
    }
    for name in ("UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64"):
        info = np.iinfo(np.dtype(name.lower()))
        values[name] = np.array([[info.min, info.max, 0], [1, info.max - 1, 2]], name.lower())
    cases = []
    for name, value in values.items():
        value = value.astype(np.object_) if name == "STRING" else value
        cases.append((f"{name}-2x3", {f"IN_{name}": value}, {}))
        cases.append((f"{name}-0x3", {f"IN_{name}": value[:0]}, {}))
    cases += [
        ("STRING_R1", {"IN_STRING_R1": s("a", "", "c")}, {}),
        ("STRING_R3", {"IN_STRING_R3": s("a", "b", "c", "d").reshape(1, 2, 2)}, {}),
        ("FP32_SCALAR", {"IN_FP32_SCALAR": np.array([2.5], np.float32)}, {}),
        (
            "only_requested",
            {"IN_INT8": np.ones((1, 1), np.int8)},
            {"requested_outputs": ["OUT_INT8"]},
        ),
    ]
    return cases


RETURN_MODES = [
    "ok", "too_many", "too_few", "tuple", "not_response", "raise", "raise_model_exception",
    "none_list_without_send", "return_none_without_send", "error_code_INVALID_ARG",
    "error_code_NOT_FOUND", "error_default_code", "error_with_outputs",
    "send_final_with_response", "send_then_final", "send_final_first", "send_then_return",
    "send_twice", "send_after_final",
]  # fmt: skip

MODELS: dict[str, list[tuple[str, dict[str, Any], dict[str, Any]]]] = {
    "io/identity_all": identity_cases(),
    "io/optional_inputs": [
        ("A", {"A": i32(1, 2)}, {}),
        ("A+C", {"A": i32(1, 2), "C": i32(10, 20)}, {}),
        # The server hands inputs over in its hash table's order, not the client's.
        ("A+B+C", {"A": i32(1), "B": i32(2), "C": i32(3)}, {"unordered": True}),
        ("missing A", {"B": i32(1)}, {}),
        ("extra", {"A": i32(1), "D": i32(1)}, {}),
    ],
    "io/batched_identity": [
        ("batch 2", {"IN": np.arange(6, dtype=np.float32).reshape(2, 3)}, {}),
        ("no batch dim", {"IN": np.arange(3, dtype=np.float32)}, {}),
        ("wrong dim", {"IN": np.zeros((1, 4), np.float32)}, {}),
    ],
    "io/bytes_forms": [("all", {"DUMMY": i32(0)}, {})],
    # Outputs unlike their declaration pass, and every engine reports the same mismatches.
    "io/output_mismatch": [
        (p + m, {"MODE": s(p + m)}, {})
        for p in ("", "send_")
        for m in ("int64", "fp16", "bool", "bytes", "rank", "scalar", "fixed_shape", "matching")
    ],
    "execute_semantics/request_echo": [
        ("plain", {"IN": i32(1)}, {}),
        ("id and params", {"IN": i32(1)}, {"request_id": "r-7", "parameters": {"k": "v"}}),
        ("one output", {"IN": i32(1)}, {"requested_outputs": ["INFO"]}),
        ("wrong dtype", {"IN": np.ones(1, np.float32)}, {}),
    ],
    "execute_semantics/return_rules": [(m, {"MODE": s(m)}, {}) for m in RETURN_MODES],
    "execute_semantics/response_params": [(p, {"PATH": s(p)}, {}) for p in ("return", "sender")],
    "execute_semantics/filter_outputs": [
        (p + "/" + ",".join(o), {"PATH": s(p)}, {"requested_outputs": o} if o else {})
        for p in ("return", "sender")
        for o in ([], ["A"], ["C", "B"])
    ],
    "decoupled/stream": [
        (m, {"MODE": s(m), "COUNT": i32(n)}, {"stream": True, "unordered": m.startswith("threads")})
        for m, n in (
            ("inline", 3),
            ("inline", 0),
            ("final_with_last", 2),
            ("final_only", 0),
            ("thread", 4),
            ("threads_interleaved", 6),  # threads race: the order is not fixed anywhere
            ("raise_after_send", 0),
            ("error_response", 0),
            ("return_value", 0),
        )
    ],
    "execute_semantics/async_execute": [("x2", {"IN": i32(1, 2, 3)}, {})],
    "decoupled/default_sender": [
        (m, {"MODE": s(m)}, {}) for m in ("thread_final", "thread_two_step")
    ],
    "bls/bls_caller": [
        (m, {"MODE": s(m), "INPUT0": np.array([1.5, -2.0], np.float32)}, {})
        for m in (
            "sync",
            "request_fields",
            "string_correlation_id",
            "requested_subset",
            "input_passthrough",
            "missing_model",
            "error_response",
            "bad_input",
            "decoupled_without_flag",
            "stream",
            "stream_replay",
            "stream_cancel",
            "sync_to_decoupled_stream_error",
            "bytes",
            "response_parameters",
            "many",
        )
    ],  # fmt: skip
    "local/bls_mixed": [
        (m, {"MODE": s(m)}, {})
        for m in ("decoupled_to_default", "async_decoupled_to_default", "async_stream", "async")
    ],
    "request_rescheduling/iterative_default": [
        (m, {"MODE": s(m), "STEPS": i32(n)}, {})
        for m, n in (("ok", 4), ("ok", 1), ("respond_while_rescheduled", 3))
    ],
    "request_rescheduling/iterative_decoupled": [
        (m, {"MODE": s(m), "STEPS": i32(n)}, {"stream": True})
        for m, n in (("ok", 5), ("ok", 1), ("raise", 5))
    ],
    "execute_semantics/sequence_echo": sequence_cases(i32(7)),
    "local/sequence_controls": sequence_cases(i32(7), string_ids=False),
    "local/sequence_controls_batched": sequence_cases(np.array([[7]], np.int32), string_ids=False),
    "decoupled/async_stream": [
        (m, {"MODE": s(m), "COUNT": i32(3)}, {"stream": True})
        for m in ("await", "task", "task_then_raise", "raise")
    ],
    # What the server's metrics API refuses, refused offline with its texts.
    "metrics/custom_metrics": [
        (m, {"MODE": s(m), "VALUES": np.array([1.0, 2.0])}, {})
        for m in (
            "apply",
            "misuse:counter_negative_increment",
            "misuse:counter_set",
            "misuse:counter_observe",
            "misuse:gauge_observe",
            "misuse:gauge_negative_increment",
            "misuse:histogram_increment",
            "misuse:histogram_set",
            "misuse:histogram_value",
            "misuse:same_name_other_kind",
            "misuse:same_name_same_kind",
            "apply",
        )
    ],
    "local/metric_sharing": [("first", {"X": np.ones(1, np.float32)}, {})] * 2,
    # sys.exit() and KeyboardInterrupt in execute: that batch's error, as any exception.
    "tracebacks/tb_sync": [
        (m, {"MODE": s(m)}, {}) for m in ("sys_exit", "interrupt", "base_exception", "ok")
    ],
    "tracebacks/tb_async": [
        (m, {"MODE": s(m)}, {}) for m in ("sys_exit", "base_exception", "raise", "ok")
    ],
}


def outcome(model: Any, inputs: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    """The case's answer, with the output mismatches the engine reported for it."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", OutputMismatchWarning)
        answer = _answer(model, inputs, kwargs)
    reported = [str(w.message) for w in caught if w.category is OutputMismatchWarning]
    return answer + (reported,) if reported else answer


def _answer(model: Any, inputs: dict[str, Any], kwargs: dict[str, Any]) -> Any:
    kwargs = dict(kwargs)
    unordered = kwargs.pop("unordered", False)
    try:
        if kwargs.pop("stream", False):
            got = [_described(r, unordered) for r in model.infer_stream(inputs, **kwargs)]
            return ("stream", sorted(got, key=repr) if unordered else got)
        return ("ok", _described(model.infer(inputs, **kwargs), unordered))
    except InferError as e:
        return ("error", e.message)


def _described(outputs: dict[str, np.ndarray], unordered: bool = False) -> dict[str, Any]:
    """Outputs as comparable values: dtype, shape and the exact bytes (NaN, -0.0 too);
    ``unordered``: the elements of BYTES outputs as a sorted list."""
    out: dict[str, Any] = {}
    for name, array in sorted(outputs.items()):
        if array.dtype == np.object_:
            items = [bytes(v) for v in array.reshape(-1)]
            out[name] = ("object", array.shape, sorted(items) if unordered else items)
        else:
            out[name] = (array.dtype.str, array.shape, np.ascontiguousarray(array).tobytes())
    return out


#: A caller of our own for what the conformance callers do not do: a decoupled call to a
#: default-mode model, the same from async_exec, and async_exec of a stream.
MIXED_CALLER = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

def request(model, **inputs):
    tensors = [pb_utils.Tensor(k, np.array(v)) for k, v in inputs.items()]
    out = "OUTPUT0" if model == "bls_identity" else "OUT"
    return pb_utils.InferenceRequest(
        model_name=model, inputs=tensors, requested_output_names=[out])

def report(r):
    if r.has_error():
        return {"error": r.error().message()}
    return {t.name(): t.as_numpy().tolist() for t in r.output_tensors()}

class TritonPythonModel:
    async def execute(self, requests):
        mode = pb_utils.get_input_tensor_by_name(requests[0], "MODE").as_numpy()[0].decode()
        x = np.array([1.0, 2.0], np.float32)
        stream = dict(COUNT=np.array([2], np.int32), DELAY_MS=np.array([0], np.int32))
        if mode == "decoupled_to_default":
            got = [report(r) for r in request("bls_identity", INPUT0=x).exec(decoupled=True)]
        elif mode == "async_decoupled_to_default":
            it = await request("bls_identity", INPUT0=x).async_exec(decoupled=True)
            got = [report(r) for r in it]
        elif mode == "async_stream":
            it = await request("bls_stream", **stream).async_exec(decoupled=True)
            got = [report(r) for r in it]
        else:
            got = [report(await request("bls_identity", INPUT0=x).async_exec())]
        text = np.array([json.dumps(got).encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", text)]) for _ in requests]
"""

MIXED_CALLER_IO = """backend: "python"
input [ { name: "MODE" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "RESULT" data_type: TYPE_STRING dims: [ 1 ] } ]
"""

#: A sequence model with every kind of control input the harness simulates: it reports the
#: inputs it got (the controls the sequence batcher added), the correlation id and flags.
SEQUENCE_CONTROLS = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            seen = {
                "correlation_id": request.correlation_id(),
                "flags": request.flags(),
                "inputs": {
                    t.name(): [t.as_numpy().dtype.str, t.as_numpy().shape, t.as_numpy().tolist()]
                    for t in request.inputs()
                },
            }
            shape = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy().shape
            info = np.array([json.dumps(seen, sort_keys=True).encode()], dtype=object)
            info = pb_utils.Tensor("INFO", info.reshape(shape))
            responses.append(pb_utils.InferenceResponse([info]))
        return responses
"""

SEQUENCE_CONTROLS_CONFIG = """backend: "python"
max_batch_size: {max_batch_size}
sequence_batching {{
  max_sequence_idle_microseconds: 60000000
  control_input [
    {{ name: "START" control [ {{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "END" control [ {{ kind: CONTROL_SEQUENCE_END fp32_false_true: [ 0, 1 ] }} ] }},
    {{ name: "READY"
       control [ {{ kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true ] }} ] }},
    {{ name: "CORRID" control [ {{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 }} ] }}
  ]
}}
input [ {{ name: "IN" data_type: TYPE_INT32 dims: [ 1 ] }} ]
output [ {{ name: "INFO" data_type: TYPE_STRING dims: [ 1 ] }} ]
"""

#: The models a model calls through BLS, served (or started) beside it.
OTHERS = {
    "local/bls_mixed": ["bls/bls_identity", "bls/bls_stream"],
    "bls/bls_caller": ["bls/bls_identity", "bls/bls_error", "bls/bls_stream", "bls/bls_params"],
}


#: Families of one name share their series, and metrics of one label set are one series
#: whichever family object made them; a histogram keeps its first buckets.
METRIC_SHARING = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        family = pb_utils.MetricFamily
        self.first = family(name="pbtest_shared_total", description="d", kind=family.COUNTER)
        self.second = family(name="pbtest_shared_total", description="d", kind=family.COUNTER)
        self.a = self.first.Metric(labels={"k": "v"})
        self.b = self.second.Metric(labels={"k": "v"})
        self.other = self.second.Metric(labels={"k": "w"})
        self.gauges = family(name="pbtest_shared_gauge", description="g", kind=family.GAUGE)
        self.ga, self.gb = self.gauges.Metric(labels={}), self.gauges.Metric(labels={})
        self.hist = family(name="pbtest_shared_hist", description="h", kind=family.HISTOGRAM)
        self.ha = self.hist.Metric(labels={}, buckets=[1.0])
        self.hb = self.hist.Metric(labels={}, buckets=[2.0])

    def execute(self, requests):
        self.a.increment(3)
        self.ga.set(5)
        self.gb.increment(1)
        self.ha.observe(0.5)
        self.hb.observe(1.5)
        seen = {
            "a": self.a.value(), "b": self.b.value(), "other": self.other.value(),
            "ga": self.ga.value(), "gb": self.gb.value(),
        }
        out = np.array([json.dumps(seen).encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", out)]) for _ in requests]
"""
METRIC_SHARING_IO = """
backend: "python"
max_batch_size: 0
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


@pytest.fixture(scope="module")
def repository(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Copies of the models: some write reports into their model directory."""
    root = tmp_path_factory.mktemp("offline_conformance")
    for key in {*MODELS, *(o for others in OTHERS.values() for o in others)}:
        feature, name = key.split("/")
        if feature != "local":
            shutil.copytree(CONFORMANCE / feature / "models" / name, root / name)
    (root / "bls_mixed" / "1").mkdir(parents=True)
    (root / "bls_mixed" / "1" / "model.py").write_text(MIXED_CALLER)
    (root / "bls_mixed" / "config.pbtxt").write_text(MIXED_CALLER_IO)
    (root / "metric_sharing" / "1").mkdir(parents=True)
    (root / "metric_sharing" / "1" / "model.py").write_text(METRIC_SHARING)
    (root / "metric_sharing" / "config.pbtxt").write_text(METRIC_SHARING_IO)
    for name, max_batch_size in (("sequence_controls", 0), ("sequence_controls_batched", 4)):
        (root / name / "1").mkdir(parents=True)
        (root / name / "1" / "model.py").write_text(SEQUENCE_CONTROLS)
        config = SEQUENCE_CONTROLS_CONFIG.format(max_batch_size=max_batch_size)
        (root / name / "config.pbtxt").write_text(config)
    yield root


@pytest.mark.parametrize("key", list(MODELS))
def test_offline_equals_server(repository: Path, key: str) -> None:
    model_dir = repository / key.split("/")[1]
    cases = MODELS[key]
    results: dict[str, list[Any]] = {}
    others = [repository / o.split("/")[1] for o in OTHERS.get(key, [])]
    for mode, kind in (("server", ServerModel), ("inprocess", ModelHarness), ("stub", StubModel)):
        with contextlib.ExitStack() as stack:
            if kind is ServerModel:
                model = stack.enter_context(ServerModel(model_dir, others=others))
            else:
                for other in others:
                    stack.enter_context(kind(other))
                model = stack.enter_context(kind(model_dir))
            results[mode] = [outcome(model, inputs, kwargs) for _, inputs, kwargs in cases]
    if key == "io/output_mismatch":  # every case but "matching" reports its one output
        assert [len(r) for r in results["server"]] == [3] * 7 + [2] + [3] * 7 + [2]
    wrong = []
    for i, (case, _, _) in enumerate(cases):
        server = results["server"][i]
        assert server[0] in ("ok", "stream", "error")
        for mode in ("inprocess", "stub"):
            if results[mode][i] != server:
                wrong.append(f"[{case}] {mode}: {results[mode][i]!r}\n  server: {server!r}")
    assert not wrong, f"{key}:\n" + "\n".join(wrong)


AUTO_COMPLETED = ["ac_full", "ac_no_config_file", "ac_decoupled", "ac_marker", "ac_helpers"]
AUTO_COMPLETE_FAILS = ["ac_raises", "ac_returns_none", "ac_bad_max_batch", "ac_conflict_dtype"]


@pytest.fixture(scope="module")
def auto_complete_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from pybackend.server import TritonServer

    root = tmp_path_factory.mktemp("auto_complete")
    for name in AUTO_COMPLETED + AUTO_COMPLETE_FAILS:
        shutil.copytree(CONFORMANCE / "auto_complete" / "models" / name, root / name)
    with TritonServer(root, model_control_mode="explicit", load_models=AUTO_COMPLETED) as s:
        yield s


@pytest.mark.parametrize("name", AUTO_COMPLETED)
def test_auto_completed_config_equals_server(auto_complete_server: Any, name: str) -> None:
    """What auto_complete_config made of the config, as the server then holds it (every
    field's default, a dynamic batcher's preferred size): the same offline."""
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(auto_complete_server.http_url)
    try:
        served = client.get_model_config(name)
    finally:
        client.close()
    model_dir = auto_complete_server.model_repository / name
    for kind in (ModelHarness, StubModel):
        with kind(model_dir) as model:
            assert model.config == served, kind.__name__


@pytest.mark.parametrize("name", AUTO_COMPLETE_FAILS)
def test_auto_complete_failures_say_what_the_server_says(
    auto_complete_server: Any, name: str
) -> None:
    """The server's load error holds the stub mode's message whole, and the exception the
    model raised in-process (raised as itself there, for pytest.raises)."""
    import tritonclient.http as httpclient
    from tritonclient.utils import InferenceServerException

    client = httpclient.InferenceServerClient(auto_complete_server.http_url)
    try:
        with pytest.raises(InferenceServerException) as served:
            client.load_model(name)
    finally:
        client.close()
    model_dir = auto_complete_server.model_repository / name
    for kind in (ModelHarness, StubModel):
        with pytest.raises(Exception) as offline:
            kind(model_dir).start()
        assert str(offline.value) in str(served.value), kind.__name__
    from pybackend.testing import harness_transport

    assert not harness_transport().harnesses  # a failed start leaves nothing registered
