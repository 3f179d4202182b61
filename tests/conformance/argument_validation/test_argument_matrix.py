"""The argument matrix (issue 27): every public callable of pb_utils x each of its arguments x
every kind of value (None, str, bytes, numpy.bytes_, numpy.str_, int, bool, float, numpy
integers and floats, list, tuple, [], [None], dict), run for real inside models/argmatrix,
compared cell by cell with the ORIGINAL backend's table.

The original's table is produced at test time by running the same model under the original
(``test_the_stored_table_is_the_originals``, both backends) and kept in
``original_table.json`` (written by ``matrix_runner.py --write``) so that a session that runs
only ours compares with it too; the stored table failing to match a fresh run fails the
suite, so it cannot drift from the original.
"""

from __future__ import annotations

import fnmatch
import inspect
import pathlib
import shutil
from typing import Dict

import pytest
from matrix_runner import GENERATE_COMMAND, load_stored, run_table

from conformance_support.backend import selected_backend
from conformance_support.stub_env import skip_unless_stubs_involved
from pybackend import utils as pb_utils

DOCS = pathlib.Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"

# Cells (fnmatch patterns) where ours differs on purpose; each is in docs/compatibility.md.
PURE_PYTHON = (
    "pure-Python helper (triton_python_backend_utils.py in the original): for an argument of "
    "the wrong kind ours raises ValueError naming the model and the dict it expects, where "
    "the original fails with whatever TypeError/AttributeError/KeyError its body runs into"
)
DEVIATIONS: Dict[str, str] = {
    "ModelConfig(model_config=dict)": "ours also takes the configuration as a dict",
    "ModelConfig(model_config=np.bool_)": "json's text names the type, which numpy 2 calls bool",
    "ModelConfig.add_input(input=*)": PURE_PYTHON,
    "ModelConfig.add_output(output=*)": PURE_PYTHON,
    "ModelConfig.set_model_transaction_policy(transaction_policy_dict=*)": PURE_PYTHON,
    "deserialize_bytes_tensor(encoded_tensor=*)": (
        "ours parses any bytes-like object through memoryview and refuses other objects with "
        "memoryview's TypeError; the original's pure-Python loop takes anything with len() "
        "(so [] and a str parse) and fails differently on the rest"
    ),
    "numpy_to_triton_type(data_type=np.*)": (
        "both compare a numpy scalar value (not a type) with numpy types: numpy 2, under which "
        "ours runs, says unequal (None), where numpy 1, under which the original's table was "
        "made, raises an unrelated TypeError (ours too, under numpy 1)"
    ),
}

# Public callables with arguments that have no row, and why.
NOT_IN_MATRIX = {
    "Tensor.empty": "pybackend extension (UV-12), not in the original",
    "batch_requests": "pybackend extension (UV-16), not in the original",
    "RequestBatch": "pybackend extension (UV-16), not in the original",
    "RequestBatch.rows": "pybackend extension (UV-16), not in the original",
    "RequestBatch.split": "pybackend extension (UV-16), not in the original",
    "RequestBatch.send": "pybackend extension (UV-16), not in the original",
    "InferenceResponseSender": "no Python constructor in the original",
    "InferenceTrace": "no Python constructor in the original",
    "Metric": "no Python constructor in the original (MetricFamily.Metric makes them)",
    "shared": "pybackend extension (issue 29, docs/instances.md), not in the original",
}


def _deviation(cell: str) -> str | None:
    for pattern, reason in DEVIATIONS.items():
        if fnmatch.fnmatchcase(cell, pattern.replace("[", "[[]")):
            return reason
    return None


def _copy_models(tmp_path_factory: pytest.TempPathFactory, name: str) -> pathlib.Path:
    target = tmp_path_factory.mktemp(name) / "models"
    source = pathlib.Path(__file__).resolve().parent / "models"
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """The matrix as the selected backend runs it."""
    return run_table(_copy_models(tmp_path_factory, "matrix"), selected_backend())


def test_every_cell_matches_the_original(table: Dict[str, str]) -> None:
    expected: Dict[str, str] = load_stored()["table"]
    assert sorted(table) == sorted(expected), "the matrix's cells changed: regenerate the table"
    differ = []
    for cell in sorted(expected):
        if table[cell] == expected[cell]:
            continue
        if selected_backend() == "ours" and _deviation(cell):
            continue
        differ.append(f"{cell}\n    original: {expected[cell]}\n    this:     {table[cell]}")
    assert not differ, f"{len(differ)} cells differ:\n" + "\n".join(differ)


def test_the_stored_table_is_the_originals(
    table: Dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A fresh run of the original gives the stored table (so ours is compared with what the
    original does now, not with a copy that went stale)."""
    if selected_backend() == "original":
        fresh = table
    else:
        skip_unless_stubs_involved("a run of the original backend and the stored table")
        from pybackend.server import original_venv

        try:
            original_venv()
        except FileNotFoundError as e:
            pytest.skip(f"the original backend is not installed here: {e}")
        fresh = run_table(_copy_models(tmp_path_factory, "original"), "original")
    stored = load_stored()
    assert stored["generated_by"] == GENERATE_COMMAND
    stale = sorted(
        c for c in set(fresh) | set(stored["table"]) if fresh.get(c) != stored["table"].get(c)
    )
    assert not stale, (
        f"original_table.json is stale in {len(stale)} cells (first: {stale[:3]}); "
        f"regenerate it with `{GENERATE_COMMAND}`"
    )


# Deviations that show only under some numpy versions of our stub (`make test-numpy1` runs it
# with numpy 1, as the original's stub runs, and then they match the original; numpy 2.0,
# the CPython 3.9 run's, still compares a scalar value with a type as numpy 1 does).
NUMPY2_ONLY = {"ModelConfig(model_config=np.bool_)", "numpy_to_triton_type(data_type=np.*)"}


@pytest.mark.deviation("lists our deviations")
def test_every_deviation_is_used_and_documented(table: Dict[str, str]) -> None:
    expected = load_stored()["table"]
    docs = DOCS.read_text()
    for pattern in DEVIATIONS:
        cells = [c for c in expected if fnmatch.fnmatchcase(c, pattern.replace("[", "[[]"))]
        if pattern not in NUMPY2_ONLY:
            assert any(table[c] != expected[c] for c in cells), f"deviation {pattern} is not needed"
        assert f"`{pattern}`" in docs, f"deviation {pattern} is not in docs/compatibility.md"


def _public_callables() -> set[str]:
    """pb_utils' public callables that take arguments, as the matrix names its rows."""
    names = set()
    for name in pb_utils.__all__:
        obj = getattr(pb_utils, name)
        if inspect.isclass(obj):
            if issubclass(obj, (BaseException, int)):
                continue
            if obj.__init__ is not object.__init__ and _takes_arguments(obj.__init__):
                names.add(name)
            for attr in vars(obj):
                if attr.startswith("_") and attr != "__dlpack__":
                    continue
                bound = getattr(obj, attr)
                if callable(bound) and not inspect.isclass(bound) and _takes_arguments(bound):
                    names.add(f"{name}.{attr}")
        elif callable(obj) and _takes_arguments(obj):
            names.add(name)
    return names


def _takes_arguments(function: object) -> bool:
    try:
        parameters = inspect.signature(function).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return any(p not in ("self", "cls") for p in parameters)


def test_every_public_callable_has_a_row() -> None:
    rows = {cell.split("(", 1)[0] for cell in load_stored()["table"]}
    missing = _public_callables() - rows - set(NOT_IN_MATRIX)
    assert not missing, f"pb_utils callables without a row in models/argmatrix: {missing}"
