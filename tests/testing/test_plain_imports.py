"""The modules a model imports by plain name from its own directories (``import helpers``
finding ``1/helpers.py``, ``import level`` finding the model directory's ``level.py``, a
package ``tools/``) are that model's own in-process, as in its stub process: two models
whose files share those names each run their own, whether run one after the other or at
once, at import and in ``execute``. Before, the second model got the first one's modules
from ``sys.modules``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from model_dirs import SEEN_CONFIG, seen, write_model

from pybackend.testing import ModelHarness, ServerModel, StubModel
from pybackend.testing.harness import forget_imports

MODEL = """
import calendar

import helpers
import level
import numpy as np
import tools.names
import triton_python_backend_utils as pb_utils
from tools import names


class TritonPythonModel:
    def execute(self, requests):
        import helpers as late  # an import made in execute finds the model's own too

        seen = [
            helpers.NAME,
            late.NAME,
            level.NAME,
            names.NAME,
            tools.names.NAME,
            helpers.FROM_SIBLING,
            # A name the standard library has: the interpreter's module, as in a stub,
            # whose sys.path has the model's directories after the standard library's.
            str(hasattr(calendar, "MODEL_FILE")),
        ]
        text = np.array([" ".join(seen).encode()], np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("SEEN", text)]) for _ in requests]
"""


def write(root: Path, name: str) -> Path:
    model_dir = write_model(root, name, MODEL, SEEN_CONFIG.format(name=name))
    (model_dir / "1" / "tools").mkdir()
    (model_dir / "1" / "helpers.py").write_text(
        f"import sibling\nNAME = 'helpers-{name}'\nFROM_SIBLING = sibling.NAME\n"
    )
    (model_dir / "1" / "sibling.py").write_text(f"NAME = 'sibling-{name}'\n")
    (model_dir / "1" / "tools" / "__init__.py").write_text("")
    (model_dir / "1" / "tools" / "names.py").write_text(f"NAME = 'tools-{name}'\n")
    (model_dir / "1" / "calendar.py").write_text("MODEL_FILE = True\n")
    (model_dir / "level.py").write_text(f"NAME = 'level-{name}'\n")
    return model_dir


def expected(name: str) -> str:
    return (
        f"helpers-{name} helpers-{name} level-{name} tools-{name} tools-{name} sibling-{name} False"
    )


@pytest.mark.parametrize("kind", [ServerModel, StubModel, ModelHarness])
def test_a_model_gets_its_own_modules(tmp_path: Path, kind: type) -> None:
    model_dir = write(tmp_path, "first")
    with kind(model_dir) as model:
        assert seen(model) == expected("first")


def test_two_models_one_after_the_other_and_at_once(tmp_path: Path) -> None:
    first, second = write(tmp_path, "first"), write(tmp_path, "second")
    for model_dir in (first, second):
        with ModelHarness(model_dir) as model:
            assert seen(model) == expected(model_dir.name)
    with ModelHarness(first) as a, ModelHarness(second) as b:
        assert (seen(a), seen(b)) == (expected("first"), expected("second"))
    assert "helpers" not in sys.modules and "level" not in sys.modules


def test_a_module_the_test_imported_is_the_one_the_model_gets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A test that imports the model's helper by plain name to patch it patches what the
    model runs (in-process only: a stub process imports its own)."""
    model_dir = write(tmp_path, "patched")
    monkeypatch.syspath_prepend(str(model_dir / "1"))
    monkeypatch.delitem(sys.modules, "helpers", raising=False)
    monkeypatch.delitem(sys.modules, "sibling", raising=False)
    import helpers  # type: ignore[import-not-found]

    monkeypatch.setattr(helpers, "NAME", "patched by the test")
    try:
        with ModelHarness(model_dir) as model:
            assert seen(model).startswith("patched by the test patched by the test level-patched")
    finally:
        sys.modules.pop("helpers", None)
        sys.modules.pop("sibling", None)


def test_forget_imports_reads_the_files_again(tmp_path: Path) -> None:
    """What devserve's reload does: the model's plain-name modules are read again too."""
    model_dir = write(tmp_path, "edited")
    with ModelHarness(model_dir) as model:
        assert seen(model) == expected("edited")
    (model_dir / "1" / "helpers.py").write_text(
        "import sibling\nNAME = 'helpers-changed'\nFROM_SIBLING = sibling.NAME\n"
    )
    with ModelHarness(model_dir) as model:  # not forgotten: the module as first imported
        assert seen(model) == expected("edited")
    forget_imports(model_dir / "1")
    with ModelHarness(model_dir) as model:
        assert seen(model).startswith("helpers-changed helpers-changed level-edited")
