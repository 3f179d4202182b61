"""Outputs through the offline harness in all three modes (in-process, a real stub, a real
tritonserver): outputs that do not match the config pass and are reported, as the original
backend passes them; PYBACKEND_STRICT_OUTPUTS refuses them; the outputs a model is asked for.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from model_dirs import how, write_model

from pybackend.testing import InferError, OutputMismatchWarning

BOTH = pytest.mark.parametrize("pybackend_mode", ["inprocess", "stub", "server"])


WRONG_OUTPUTS = """
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            how = pb_utils.get_input_tensor_by_name(r, "HOW").as_numpy()[0].decode()
            send = how.startswith("send_")
            how = how[len("send_"):] if send else how
            y = {"dtype": np.ones(3, np.int64), "rank": np.ones((2, 2), np.float32),
                 "ok": np.ones(3, np.float32)}.get(how, np.ones(3, np.float32))
            name = "EXTRA" if how == "name" else "Y"
            response = pb_utils.InferenceResponse([pb_utils.Tensor(name, y)])
            if send:  # the response sender's path
                flags = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
                r.get_response_sender().send(response, flags=flags)
                response = None
            out.append(response)
        return out
"""

WRONG_OUTPUTS_IO = """name: "{name}"
backend: "python"
input [ {{ name: "HOW" data_type: TYPE_STRING dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ -1 ] }} ]
"""

STRICT = 'parameters: { key: "PYBACKEND_STRICT_OUTPUTS" value: { string_value: "%s" } }\n'


@BOTH
@pytest.mark.parametrize("path", ["", "send_"])
def test_outputs_that_do_not_match_the_config_pass(
    triton_model: Any, tmp_path: Path, path: str
) -> None:
    """An output whose data type or shape differs from the config reaches the client as the
    model made it, as the original backend passes it; every engine reports it, as an
    OutputMismatchWarning and in ``output_mismatches``."""
    name = "outs"
    model = triton_model(
        write_model(tmp_path, name, WRONG_OUTPUTS, WRONG_OUTPUTS_IO.format(name=name))
    )
    what = f"output 'Y' of model instance '{name}_0'"
    with pytest.warns(OutputMismatchWarning) as warned:
        y = model.infer(how(path + "dtype"))["Y"]
    assert (y.dtype, y.tolist()) == (np.int64, [1, 1, 1])
    text = what + " has data type TYPE_INT64 but the model configuration declares TYPE_FP32"
    assert [str(w.message).startswith(text) for w in warned] == [True]
    with pytest.warns(OutputMismatchWarning):
        assert model.infer(how(path + "rank"))["Y"].shape == (2, 2)
    assert model.infer(how(path + "ok"))["Y"].tolist() == [1, 1, 1]
    # An output the config does not declare is not asked for (the client named none, so
    # Triton asks for the declared ones): it is dropped, nothing to report.
    assert model.infer(how(path + "name")) == {}
    assert [m.output for m in model.output_mismatches] == ["Y", "Y"]
    assert model.output_mismatches[0].text.startswith(text)
    assert model.output_mismatches[1].text == (
        what + " has shape [2, 2] but the model configuration declares [-1] (-1: any size): "
        "reshape the array or fix config.pbtxt"
    )


@BOTH
@pytest.mark.parametrize("path", ["", "send_"])
def test_strict_outputs_refuse_what_does_not_match(
    triton_model: Any, tmp_path: Path, path: str
) -> None:
    """PYBACKEND_STRICT_OUTPUTS: "true" turns each mismatch into an error response (INVALID_ARG)
    with the same text, in every engine (the stub's rules: stub/returns.py)."""
    name = "strict"
    config = WRONG_OUTPUTS_IO.format(name=name) + STRICT % "true"
    model = triton_model(write_model(tmp_path, name, WRONG_OUTPUTS, config))
    what = f"output 'Y' of model instance '{name}_0'"
    expected = {
        "dtype": what + " has data type TYPE_INT64 but the model configuration declares "
        "TYPE_FP32: convert the array (e.g. numpy astype) or fix config.pbtxt",
        "rank": what + " has shape [2, 2] but the model configuration declares [-1] "
        "(-1: any size): reshape the array or fix config.pbtxt",
    }
    for case, text in expected.items():
        with pytest.raises(InferError) as info:
            model.infer(how(path + case))
        assert text == info.value.message
    assert model.infer(how(path + "ok"))["Y"].tolist() == [1, 1, 1]
    assert model.infer(how(path + "name")) == {}  # not requested: not checked
    assert model.output_mismatches == []


@BOTH
def test_strict_outputs_takes_a_yes_or_a_no(triton_model: Any, tmp_path: Path) -> None:
    name = "strict_bad"
    config = WRONG_OUTPUTS_IO.format(name=name) + STRICT % "maybe"
    with pytest.raises(Exception) as info:
        triton_model(write_model(tmp_path, name, WRONG_OUTPUTS, config))
    assert (
        "model config parameter PYBACKEND_STRICT_OUTPUTS must be true or false, found "
        "'maybe'" in str(info.value)
    )


REQUESTED = """
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse([
                pb_utils.Tensor("A", np.array(
                    [json.dumps(sorted(r.requested_output_names())).encode()], np.object_)),
                pb_utils.Tensor("B", np.zeros(1, np.float32)),
            ])
            for r in requests
        ]
"""

REQUESTED_IO = """name: "{name}"
backend: "python"
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [
  {{ name: "A" data_type: TYPE_STRING dims: [ 1 ] }},
  {{ name: "B" data_type: TYPE_FP32 dims: [ 1 ] }}
]
"""


@BOTH
def test_requested_outputs_as_the_model_sees_them(triton_model: Any, tmp_path: Path) -> None:
    """A client that names no outputs gets every declared one, and the model is asked for
    all of them (requested_output_names() lists them), as under tritonserver."""
    model_dir = write_model(tmp_path, "req", REQUESTED, REQUESTED_IO.format(name="req"))
    model = triton_model(model_dir)
    x = {"X": np.zeros(1, np.float32)}
    every = model.infer(x)
    assert sorted(every) == ["A", "B"]
    assert json.loads(every["A"][0]) == ["A", "B"]
    only = model.infer(x, requested_outputs=["A"])
    assert list(only) == ["A"] and json.loads(only["A"][0]) == ["A"]
