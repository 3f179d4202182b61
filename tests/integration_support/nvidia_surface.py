"""NVIDIA PyTriton's public surface, read from the installed nvidia-pytriton's source
(importing ``pytriton`` needs packages the server does not): per module, its public
names, each a function, class, enum, dataclass, constant or alias, with parameters,
fields, members and methods. test_surface.py holds pybackend.pytriton to it."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

NO_DEFAULT = "<no default>"
#: A default that is an expression (a name, a call): only its presence is compared.
SOME_DEFAULT = "<a default>"
KINDS = {
    "posonly": inspect.Parameter.POSITIONAL_ONLY,
    "arg": inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "vararg": inspect.Parameter.VAR_POSITIONAL,
    "kwonly": inspect.Parameter.KEYWORD_ONLY,
    "kwarg": inspect.Parameter.VAR_KEYWORD,
}
Param = Tuple[str, Any, Any]  # (name, kind, default)


def root() -> Path:
    spec = importlib.util.find_spec("pytriton")  # the package, not imported
    assert spec is not None and spec.submodule_search_locations, "nvidia-pytriton is missing"
    return Path(list(spec.submodule_search_locations)[0])


def module_names() -> List[str]:
    """Every module of the package ("pytriton.client.utils"), private ones included."""
    base = root()
    out = []
    for path in sorted(base.rglob("*.py")):
        parts = list(path.relative_to(base).with_suffix("").parts)
        if parts[0] == "tritonserver":
            continue  # the server's files (a stub's triton_python_backend_utils)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(["pytriton", *parts]))
    return out


def _default(node: Optional[ast.expr]) -> Any:
    if node is None:
        return NO_DEFAULT
    try:
        return ast.literal_eval(node)
    except ValueError:
        return SOME_DEFAULT


def params(fn: Any) -> List[Param]:
    a = fn.args
    positional = a.posonlyargs + a.args
    defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
    out = [
        (p.arg, KINDS["posonly" if i < len(a.posonlyargs) else "arg"], _default(d))
        for i, (p, d) in enumerate(zip(positional, defaults))
    ]
    if a.vararg:
        out.append((a.vararg.arg, KINDS["vararg"], NO_DEFAULT))
    out += [(p.arg, KINDS["kwonly"], _default(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)]
    if a.kwarg:
        out.append((a.kwarg.arg, KINDS["kwarg"], NO_DEFAULT))
    return out


def _decorators(node: Any) -> List[str]:
    return [ast.unparse(d) for d in node.decorator_list]


@dataclasses.dataclass
class Method:
    wrapper: str  # "method", "property", "classmethod", "staticmethod"
    is_async: bool
    params: List[Param]


@dataclasses.dataclass
class Name:
    module: str
    name: str
    kind: str  # "function", "decorator", "class", "dataclass", "enum", "value", "import"
    params: List[Param] = dataclasses.field(default_factory=list)
    is_async: bool = False
    fields: List[Tuple[str, Any]] = dataclasses.field(default_factory=list)  # (name, default)
    members: Dict[str, Any] = dataclasses.field(default_factory=dict)  # enum name -> value
    methods: Dict[str, Method] = dataclasses.field(default_factory=dict)
    bases: List[str] = dataclasses.field(default_factory=list)
    value: Any = SOME_DEFAULT  # a constant's value, when a literal


def _method(node: Any) -> Method:
    decorators = _decorators(node)
    wrapper = next(
        (w for w in ("property", "classmethod", "staticmethod") if w in decorators), "method"
    )
    return Method(wrapper, isinstance(node, ast.AsyncFunctionDef), params(node))


def _class(module: str, node: ast.ClassDef, classes: Dict[str, ast.ClassDef]) -> Name:
    bases = [ast.unparse(b) for b in node.bases]
    if any(b.split(".")[-1] in ("Enum", "IntFlag", "IntEnum") for b in bases):
        members = {}
        for item in node.body:
            if isinstance(item, ast.Assign) and isinstance(item.targets[0], ast.Name):
                members[item.targets[0].id] = _default(item.value)
        return Name(module, node.name, "enum", members=members, bases=bases)
    methods: Dict[str, Method] = {}
    for base in node.bases:  # methods inherited from the module's own classes
        if isinstance(base, ast.Name) and base.id in classes:
            methods.update(_class(module, classes[base.id], classes).methods)
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not item.name.startswith("_") or item.name == "__init__":
                methods[item.name] = _method(item)
    is_dataclass = any("dataclass" in d for d in _decorators(node))
    fields = []
    if is_dataclass:
        for item in node.body:
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                if "ClassVar" not in ast.unparse(item.annotation):
                    fields.append((item.target.id, _field_default(item.value)))
    kind = "dataclass" if is_dataclass else "class"
    return Name(module, node.name, kind, methods=methods, fields=fields, bases=bases)


def _field_default(node: Optional[ast.expr]) -> Any:
    if isinstance(node, ast.Call) and ast.unparse(node.func).endswith("field"):
        return SOME_DEFAULT  # default_factory
    return _default(node)


def public_names(module: str) -> Dict[str, Name]:
    """The module's public names: what it defines without a leading underscore, and
    what an ``__init__`` imports from the package (its exports)."""
    base = root()
    rel = Path(*module.split(".")[1:])
    path = base / rel / "__init__.py" if (base / rel).is_dir() else (base / rel).with_suffix(".py")
    tree = ast.parse(path.read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    out: Dict[str, Name] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if node.name.startswith("_"):
                continue
            wrapt = any("decorator" in d for d in _decorators(node))
            kind = "decorator" if wrapt else "function"
            is_async = isinstance(node, ast.AsyncFunctionDef)
            out[node.name] = Name(module, node.name, kind, params(node), is_async)
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            out[node.name] = _class(module, node, classes)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and not t.id.startswith("_"):
                    out[t.id] = Name(module, t.id, "value", value=_default(node.value))
        elif isinstance(node, ast.ImportFrom) and path.name == "__init__.py":
            if node.level or (node.module or "").startswith("pytriton"):
                for alias in node.names:
                    out[alias.asname or alias.name] = Name(module, alias.name, "import")
    return out
