"""What a developer's test meets when the model misbehaves, held to the same result in every
engine: a decoupled model that never sends FINAL (a bounded wait, one text), a finalize
that raises (logged, as the server logs it; the test's close goes on)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_dirs import write_model

from pybackend.testing import InferError, ModelHarness, StubModel
from pybackend.utils.errors import ErrorCode

IO = """backend: "python"
{extra}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 2 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 2 ] }} ]
"""

NO_FINAL = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.senders = []  # held: the request stays open

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            self.senders.append(sender)
            x = pb_utils.get_input_tensor_by_name(request, "X")
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.as_numpy())]))
"""


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub"])
def test_a_stream_without_final_ends_with_the_timeout(triton_model: Any, tmp_path: Path) -> None:
    config = IO.format(extra="model_transaction_policy { decoupled: true }")
    model = triton_model(write_model(tmp_path, "no_final", NO_FINAL, config))
    with pytest.raises(InferError) as info:
        model.infer_stream({"X": np.ones(2, np.float32)}, timeout=0.5)
    assert info.value.message == (
        "no FINAL from the response sender of 'no_final' within 0.5 s (1 responses so far)"
    )


#: Sends one response, then FINAL only once its client cancelled (at most 20 s later), and
#: notes in its model directory whether the cancel came.
FINAL_ON_CANCEL = """
import threading, time
import time
from pathlib import Path
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.note = Path(args["model_repository"]) / "cancel_seen"

    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "X")
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x.as_numpy())]))
            threading.Thread(target=self.wait, args=(sender,), daemon=True).start()

    def wait(self, sender):
        for _ in range(2000):
            if sender.is_cancelled():
                break
            time.sleep(0.01)
        self.note.write_text(str(sender.is_cancelled()))
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


@pytest.mark.parametrize("pybackend_mode", ["server"])
def test_a_served_stream_that_times_out_is_cancelled(triton_model: Any, tmp_path: Path) -> None:
    # Before: the client left the stream open and waited for the server's end of it, for
    # ever with a model that never sends FINAL.
    config = IO.format(extra="model_transaction_policy { decoupled: true }")
    model_dir = write_model(tmp_path, "final_on_cancel", FINAL_ON_CANCEL, config)
    model = triton_model(model_dir)
    with pytest.raises(InferError) as info:
        model.infer_stream({"X": np.ones(2, np.float32)}, timeout=0.5)
    assert info.value.message == (
        "no FINAL from the response sender of 'final_on_cancel' within 0.5 s (1 responses so far)"
    )
    model.close()
    assert (model_dir / "cancel_seen").read_text() == "True"


FINALIZE_RAISES = """
class TritonPythonModel:
    def execute(self, requests):
        return []

    def finalize(self):
        raise RuntimeError("cannot let go")
"""


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
def test_a_raising_finalize_is_logged_and_the_close_goes_on(tmp_path: Path, kind: Any) -> None:
    # The server logs it and unloads the model; in-process close() raised it before.
    model = kind(write_model(tmp_path, "finalize_raises", FINALIZE_RAISES)).start()
    model.close()
    (record,) = model.logs
    assert record.level == 0
    assert record.message.startswith(
        "Failed to finalize the model 'finalize_raises_0': RuntimeError: cannot let go\n\nAt:\n"
    )
    assert "finalize_raises/1/model.py(7): finalize" in record.message


EMPTY_FIRST = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            sender.send(pb_utils.InferenceResponse([]))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_a_response_without_outputs_is_a_response(triton_model: Any, tmp_path: Path) -> None:
    # A client gets it (the server dropped it before); the FINAL flag alone is none.
    config = IO.format(extra="model_transaction_policy { decoupled: true }")
    model = triton_model(write_model(tmp_path, "empty_first", EMPTY_FIRST, config))
    responses = model.infer_stream({"X": np.ones(2, np.float32)})
    assert [{k: v.tolist() for k, v in r.items()} for r in responses] == [{}, {"Y": [1, 1]}]


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_infer_of_a_decoupled_model(triton_model: Any, tmp_path: Path, pybackend_mode: str) -> None:
    # tritonserver refuses infer() of a decoupled model, even one that sends one response
    # (HTTP 501; unary gRPC likewise): every engine does, the offline ones naming the fix.
    config = IO.format(extra="model_transaction_policy { decoupled: true }")
    model = triton_model(write_model(tmp_path, "two_responses", EMPTY_FIRST, config))
    with pytest.raises(InferError) as info:
        model.infer({"X": np.ones(2, np.float32)})
    assert info.value.code == ErrorCode.UNSUPPORTED
    assert info.value.message.startswith(
        "HTTP end point doesn't support models with decoupled transaction policy"
    )
    if pybackend_mode != "server":
        assert "use infer_stream()" in info.value.message


PARAMETERS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for request in requests:
            text = np.array([request.parameters().encode()], dtype=object)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", text)]))
        return out
"""

PARAMETERS_IO = """backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_STRING dims: [ 1 ] } ]
"""


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_request_parameters_read_as_the_original_writes_them(
    triton_model: Any, tmp_path: Path
) -> None:
    # The original's text (rapidjson: shortest digits, UTF-8 kept), observed on NVIDIA's
    # backend; ours wrote doubles with %.17g, the harness escaped non-ASCII text.
    model = triton_model(write_model(tmp_path, "parameters", PARAMETERS, PARAMETERS_IO))
    x = {"X": np.ones(1, np.float32)}
    sent = {"s": 'é"/\\\t', "a": 0.1, "b": 2.0, "c": 1e20, "d": 1e-7, "e": 1e21, "f": 1.5e-6}
    sent.update({"g": -0.0, "i": 3.14, "j": -2.5e-300, "n": 7, "t": True})
    assert model.infer(x, parameters=sent)["Y"][0].decode() == (
        '{"s":"é\\"/\\\\\\t","a":0.1,"b":2.0,"c":100000000000000000000.0,"d":1e-7,"e":1e21,'
        '"f":0.0000015,"g":-0.0,"i":3.14,"j":-2.5e-300,"n":7,"t":true}'
    )
    for value in ([1], None, {"k": 1}):
        with pytest.raises(InferError) as info:
            model.infer(x, parameters={"p": value})
        assert info.value.message == (
            "parameter 'p' has invalid type. It should be either 'int', 'bool', or 'string'."
        )
        assert info.value.code == ErrorCode.INVALID_ARG


NO_OUTPUTS_DECLARED = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        c = pb_utils.Tensor("C", np.ones(1, np.float32))
        return [pb_utils.InferenceResponse([c]) for _ in requests]
"""


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_a_model_without_a_config_sends_no_outputs(triton_model: Any, tmp_path: Path) -> None:
    # No config.pbtxt: no outputs declared, so Triton asks for none and the original sends
    # none (observed); the harness passed "C" on and our backend had tritonserver refuse it
    # ("unexpected inference output 'C'").
    model_dir = write_model(tmp_path, "no_outputs", NO_OUTPUTS_DECLARED)
    (model_dir / "config.pbtxt").unlink()
    model = triton_model(model_dir)
    out = model.infer({})
    assert dict(out) == {}


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_a_model_without_execute_fails_each_request_in_the_servers_words(
    triton_model: Any, tmp_path: Path
) -> None:
    # In-process it was the AttributeError of calling model.execute.
    body = "class TritonPythonModel:\n    def initialize(self, args):\n        pass\n"
    model_dir = write_model(tmp_path, "no_exec", body, IO.format(extra=""))
    model = triton_model(model_dir)
    with pytest.raises(InferError) as info:
        model.infer({"X": np.ones(2, np.float32)})
    assert info.value.message == (
        "Failed to process the request(s) for model 'no_exec_0', message: Python model "
        f"{model_dir.resolve()}/1/model.py does not implement `execute` method."
    )


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_a_stream_of_some_outputs(triton_model: Any, tmp_path: Path) -> None:
    # ServerModel.infer_stream handed requested_outputs to tritonclient, which refused it.
    config = IO.format(extra="model_transaction_policy { decoupled: true }")
    config += 'output [ { name: "Z" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
    model = triton_model(write_model(tmp_path, "empty_first", EMPTY_FIRST, config))
    responses = model.infer_stream({"X": np.ones(2, np.float32)}, requested_outputs=["Y"])
    assert [sorted(r) for r in responses] == [[], ["Y"]]


@pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])
def test_infer_batch_takes_every_engines_options(triton_model: Any) -> None:
    # ServerModel handed queued_ns to tritonclient: that request's result was None.
    model = triton_model(Path(__file__).resolve().parents[2] / "examples/model_repository/add_sub")
    a = {"INPUT0": np.ones(4, np.float32), "INPUT1": np.ones(4, np.float32)}
    options = [{"queued_ns": time.monotonic_ns(), "request_id": "a"}, {"parameters": {"k": 1}}]
    results = model.infer_batch([a, a], options=options)
    assert [r["OUTPUT0"].tolist() for r in results] == [[2, 2, 2, 2]] * 2
    with pytest.raises(TypeError):
        model.infer_batch([a], options=[{"no_such_option": 1}])


BLS_CALLER = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        x = pb_utils.get_input_tensor_by_name(requests[0], "X")
        call = pb_utils.InferenceRequest(
            model_name="callee", inputs=[x], requested_output_names=["Y"]
        )
        response = call.exec()
        if response.has_error():
            raise pb_utils.TritonModelException(response.error().message())
        return [response for _ in requests]
"""


def _fails(request: Any) -> Any:
    raise ZeroDivisionError("the fake's own bug")


@pytest.mark.parametrize("kind", [ModelHarness, StubModel])
@pytest.mark.parametrize(
    "fake, text",
    [
        (
            lambda request: None,
            "TypeError: a BLS fake must return pb_utils.InferenceResponse, got None",
        ),
        (_fails, "ZeroDivisionError: the fake's own bug"),
    ],
)
def test_a_bad_bls_fake_is_the_callers_error_response(
    tmp_path: Path, kind: Any, fake: Any, text: str
) -> None:
    # In-process, the fake's None reached the model, its exception was raised into exec().
    model_dir = write_model(tmp_path, "caller", BLS_CALLER, IO.format(extra=""))
    with kind(model_dir, bls={"callee": fake}) as model:
        with pytest.raises(InferError) as info:
            model.infer({"X": np.ones(2, np.float32)})
    assert f"message: TritonModelException: {text}\n" in info.value.message
