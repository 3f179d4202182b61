"""The pytest file `pybackend new` writes beside a generated model: it feeds the model
sample data of the declared data types and shapes and checks what the template computes
(output k = input k mod the number of inputs, converted), through ``pybackend.testing``."""

from __future__ import annotations

from typing import List

from .templates import ANY_SIZE, BATCH_ROWS, Model
from .tensor_specs import TensorSpec

_HEAD = '''"""Tests of the {name} model with pybackend.testing: offline by default; the same tests
run in a stub process and through a real tritonserver with
    pytest --pybackend-mode=inprocess,stub,server {file}
"""

from pathlib import Path

import numpy as np
{imports}
MODEL_DIR = Path(__file__).parent


def sample(dtype, shape, start=0):
    """Data of a declared data type and shape: start, start + 1... (as bytes for BYTES)."""
    values = np.arange(start, start + int(np.prod(shape)))
    if dtype is np.object_:
        return np.array([str(v).encode() for v in values], dtype=np.object_).reshape(shape)
    return values.astype(dtype).reshape(shape)

'''


def _shape(spec: TensorSpec, rows: int = 0) -> str:
    dims = [ANY_SIZE if d == -1 else d for d in spec.dims]
    return str(tuple(([rows] if rows else []) + dims))


def _inputs(
    m: Model, rows: int = 0, indent: str = "    ", name: str = "inputs", start: int = 0
) -> List[str]:
    lines = [f"{indent}{name} = {{"]
    at = f", start={start}" if start else ""
    for s in m.inputs:
        lines.append(f'{indent}    "{s.name}": sample({s.numpy}, {_shape(s, rows)}{at}),')
    return lines + [f"{indent}}}"]


def _checks(m: Model, got: str, indent: str, index: str = "") -> List[str]:
    lines = []
    for k, o in enumerate(m.outputs):
        lines.append(f'{indent}want = inputs["{m.source(k).name}"]{index}.astype({o.numpy})')
        lines.append(f'{indent}np.testing.assert_array_equal({got}["{o.name}"], want)')
    return lines


def _basic(m: Model) -> List[str]:
    return [
        "def test_outputs(triton_model):",
        "    model = triton_model(MODEL_DIR)",
        *_inputs(m),
        "    out = model.infer(inputs)",
        *_checks(m, "out", "    "),
    ]


def _batched(m: Model) -> List[str]:
    lines = [
        "def test_one_batch_of_several_requests(triton_model):",
        "    model = triton_model(MODEL_DIR)",
    ]
    lines.append(
        "    # Requests of different numbers of rows, executed together as the batcher does."
    )
    lines.append("    batch = []")
    for rows in BATCH_ROWS:
        lines += _inputs(m, rows)
        lines.append("    batch.append(inputs)")
    lines += [
        "    results = model.infer_batch(batch)",
        "    for inputs, out in zip(batch, results):",
        *_checks(m, "out", "        "),
    ]
    return lines


def _decoupled(m: Model) -> List[str]:
    first = m.inputs[0].name
    return [
        "def test_one_response_per_row(triton_model):",
        "    model = triton_model(MODEL_DIR)",
        *_inputs(m),
        "    responses = model.infer_stream(inputs)",
        f'    assert len(responses) == len(inputs["{first}"])',
        "    for i, out in enumerate(responses):",
        *_checks(m, "out", "        ", "[i : i + 1]"),
    ]


def _bls(m: Model) -> List[str]:
    lines = [
        "def target(request):",
        f'    """Stands in for {m.target}, the model execute() calls: answers with its inputs',
        '    converted. A test with the real one: ModelHarness(its directory) started first."""',
    ]
    for k, o in enumerate(m.outputs):
        src = m.source(k).name
        lines.append(
            f'    {m.vars[o.name]} = pb_utils.get_input_tensor_by_name(request, "{src}").as_numpy()'
        )
    lines.append("    return pb_utils.InferenceResponse(")
    lines.append("        [")
    lines += [f'            pb_utils.Tensor("{o.name}", {m.vars[o.name]}),' for o in m.outputs]
    lines += ["        ]", "    )", "", ""]
    lines += [
        "def test_outputs_through_the_target_model():",
        f'    with ModelHarness(MODEL_DIR, bls={{"{m.target}": target}}) as model:',
        *_inputs(m, indent="        "),
        "        out = model.infer(inputs)",
        *_checks(m, "out", "        "),
        "",
        "",
        "def test_an_error_of_the_target_model_reaches_the_client():",
        "    def failing(request):",
        '        return pb_utils.InferenceResponse(error=pb_utils.TritonError("target failed"))',
        "",
        f'    with ModelHarness(MODEL_DIR, bls={{"{m.target}": failing}}) as model:',
        *_inputs(m, indent="        "),
        '        with pytest.raises(InferError, match="target failed"):',
        "            model.infer(inputs)",
    ]
    return lines


def _sequence(m: Model) -> List[str]:
    return [
        "def test_a_sequence_answers_from_its_state(triton_model):",
        "    model = triton_model(MODEL_DIR)",
        *_inputs(m),
        *_inputs(m, name="later", start=7),
        "    out = model.infer(inputs, sequence_id=1, sequence_start=True)",
        *_checks(m, "out", "    "),
        "    # Later requests of the sequence: still its first inputs, the state it keeps.",
        "    for end in (False, True):",
        "        out = model.infer(later, sequence_id=1, sequence_end=end)",
        *_checks(m, "out", "        "),
        "",
        "",
        "def test_a_request_of_an_ended_sequence_is_refused(triton_model):",
        "    model = triton_model(MODEL_DIR)",
        *_inputs(m),
        "    model.infer(inputs, sequence_id=2, sequence_start=True, sequence_end=True)",
        '    with pytest.raises(InferError, match="must specify the START flag"):',
        "        model.infer(inputs, sequence_id=2)  # the server's refusal, as offline",
    ]


def generated_test(m: Model, file_name: str) -> str:
    imports = ""
    if m.template == "bls":
        imports = (
            "import pytest\nimport triton_python_backend_utils as pb_utils\n"
            "from pybackend.testing import InferError, ModelHarness\n"
        )
    if m.template == "sequence":
        imports = "import pytest\nfrom pybackend.testing import InferError\n"
    head = _HEAD.format(name=m.name, file=file_name, imports=imports)
    make = {
        "basic": _basic,
        "batched": _batched,
        "decoupled": _decoupled,
        "bls": _bls,
        "sequence": _sequence,
    }
    return head + "\n" + "\n".join(make[m.template](m)) + "\n"
