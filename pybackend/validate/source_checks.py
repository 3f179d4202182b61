"""model.py read, not run: it parses, its module-level imports can be found, it defines
``TritonPythonModel`` with ``execute``, and the tensor names it spells as string literals
are declared in config.pbtxt. Load failures carry the server's texts (observed on
tritonserver 2.51 with our backend: "Python model file not found in ...", "does not
define class 'TritonPythonModel'", "does not implement `execute` method")."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

from ..stub.loader import missing_file_text, no_class_text, no_execute_text
from ..stub.sequence_idle import HOOK, idle_rule
from .findings import ERROR, NOTE, WARNING, ModelReport

MODEL_CLASS = "TritonPythonModel"
#: pb_utils call -> (which part of the config its literal names, the argument it is in)
NAME_CALLS = {
    "get_input_tensor_by_name": ("input", 1),
    "get_input_config_by_name": ("input", 1),
    "get_output_config_by_name": ("output", 1),
}
#: Always there for a model: the module the backend provides.
PROVIDED = {"triton_python_backend_utils", "c_python_backend_utils"}


def parse_model(report: ModelReport, path: Path) -> Optional[ast.Module]:
    """The module's syntax tree; None (with the finding) where it cannot be had."""
    file = report.file_of(path)
    if not path.is_file():
        report.add(ERROR, "model-file", missing_file_text(path), file)
        return None
    source = path.read_text(errors="replace")
    try:
        return ast.parse(source, str(path))
    except SyntaxError as e:
        report.add(ERROR, "syntax", f"SyntaxError: {e.msg}", file, e.lineno or 0, e.offset or 0)
        return None


def model_class(tree: ast.Module) -> Tuple[Optional[ast.ClassDef], bool]:
    """(the class statement, whether the name is bound at all): a class imported from a
    sibling module or made by an assignment is bound but cannot be read here."""
    found: Tuple[Optional[ast.ClassDef], bool] = (None, False)
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == MODEL_CLASS:
            found = (node, True)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            if any((a.asname or a.name.split(".")[-1]) == MODEL_CLASS for a in node.names):
                found = (None, True)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == MODEL_CLASS for t in node.targets):
                found = (None, True)
    return found


def methods(cls: ast.ClassDef) -> List[str]:
    names = []
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.append(node.name)
        elif isinstance(node, ast.Assign):
            names += [t.id for t in node.targets if isinstance(t, ast.Name)]
    return names


def check_class(report: ModelReport, path: Path, tree: ast.Module) -> Optional[ast.ClassDef]:
    file = report.file_of(path)
    cls, bound = model_class(tree)
    if not bound:
        report.add(ERROR, "model-class", no_class_text(path), file)
        return None
    if cls is None:
        return None  # imported or assigned: nothing more to read here
    inherits = any(not (isinstance(b, ast.Name) and b.id == "object") for b in cls.bases)
    if "execute" not in methods(cls) and not inherits:
        report.add(
            ERROR,
            "execute",
            f"{no_execute_text(path)} (tritonserver loads the model, then every request "
            "fails with this)",
            file,
            cls.lineno,
        )
    return cls


def check_imports(
    report: ModelReport, path: Path, tree: ast.Module, env_path: str, runtime: bool = False
) -> None:
    """Module-level absolute imports (those in try blocks or functions may be optional),
    looked up as the stub would: the version and model directories (a python-based
    backend's, ``runtime``: its own directory only), then this Python's path. A model with
    EXECUTION_ENV_PATH imports in that environment: not checked."""
    file = report.file_of(path)
    if env_path:
        report.add(
            NOTE, "import", "imports not checked: the model runs in EXECUTION_ENV_PATH", file
        )
        return
    search = [str(path.parent)] + ([] if runtime else [str(report.path)]) + sys.path
    for node in tree.body:
        for module, line in _imported(node):
            top = module.split(".")[0]
            if top in PROVIDED or _findable(top, search):
                continue
            report.add(
                ERROR,
                "import",
                f"ModuleNotFoundError: No module named '{top}' (install it in the "
                "environment the server runs the model in, or set EXECUTION_ENV_PATH)",
                file,
                line,
            )


def _imported(node: ast.stmt) -> Iterator[Tuple[str, int]]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield alias.name, node.lineno
    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        yield node.module, node.lineno


def _findable(top: str, search: Sequence[str]) -> bool:
    if top in sys.builtin_module_names:
        return True
    saved = sys.path
    sys.path = list(search)
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False
    finally:
        sys.path = saved


def check_names(report: ModelReport, path: Path, tree: ast.Module, config: Dict[str, Any]) -> None:
    """Tensor names as string literals in pb_utils calls, against the config's."""
    file = report.file_of(path)
    declared = {k: [t.get("name") for t in config.get(k) or []] for k in ("input", "output")}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        function = _called(node)
        if function in NAME_CALLS:
            kind, position = NAME_CALLS[function]
            name = _literal(node.args[position] if len(node.args) > position else None)
            if name is not None and name not in declared[kind]:
                report.add(
                    ERROR,
                    "tensor-name",
                    f"{function}(..., '{name}'): the configuration declares no {kind} '{name}' "
                    f"({_listed(declared[kind])}), so this returns None",
                    file,
                    node.lineno,
                    node.col_offset + 1,
                )
        elif function == "InferenceResponse":
            for tensor in _response_tensors(node):
                name = _literal(tensor.args[0] if tensor.args else None)
                if name is not None and name not in declared["output"]:
                    report.add(
                        WARNING,
                        "tensor-name",
                        f"the response holds output '{name}', which the configuration does not "
                        f"declare ({_listed(declared['output'])}): no client can ask for it",
                        file,
                        tensor.lineno,
                        tensor.col_offset + 1,
                    )


def check_hooks(report: ModelReport, path: Path, tree: ast.Module, config: Dict[str, Any]) -> None:
    """pybackend's own hooks the model defines where they can never be called."""
    cls, _ = model_class(tree)
    if cls is None:
        return
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == HOOK:
            if idle_rule(config) is not None:
                return
            batching = config.get("sequence_batching")
            why = (
                "its sequence_batching is an iterative sequence, one request that never idles"
                if batching is not None
                else "the configuration has no sequence_batching"
            )
            report.add(
                WARNING,
                "sequence-idle",
                f"{MODEL_CLASS}.{HOOK} is never called: pybackend calls it for a sequence the "
                f"sequence batcher ended for being idle, and {why}",
                report.file_of(path),
                node.lineno,
                node.col_offset + 1,
            )


def _called(node: ast.Call) -> str:
    f = node.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _literal(node: Optional[ast.expr]) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _response_tensors(node: ast.Call) -> Iterator[ast.Call]:
    """The ``Tensor(...)`` calls written inside the list given as output_tensors."""
    given = node.args[0] if node.args else None
    for kw in node.keywords:
        if kw.arg == "output_tensors":
            given = kw.value
    if isinstance(given, (ast.List, ast.Tuple)):
        for item in given.elts:
            if isinstance(item, ast.Call) and _called(item) == "Tensor":
                yield item


def _listed(names: List[Any]) -> str:
    return "it declares " + ", ".join(f"'{n}'" for n in names) if names else "it declares none"
