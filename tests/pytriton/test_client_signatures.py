"""pybackend.pytriton.client held to the installed PyTriton's clients (nvidia-pytriton, read
from its source: importing ``pytriton`` needs packages the server does not): each client
class PyTriton exports has every public method, property and context-manager method of
PyTriton's, of the same kind (plain, coroutine, async generator; property, classmethod),
with the same parameters: names, order, kinds and defaults. Ours may add keyword-only
parameters after PyTriton's, only those in ADDED (docs/pytriton.md says why)."""

from __future__ import annotations

import ast
import inspect
from typing import Any, Dict, List, Optional, Tuple

import pytest

import pybackend.pytriton.client as ours
from integration_support.nvidia_surface import KINDS as _KINDS
from integration_support.nvidia_surface import NO_DEFAULT as _NO_DEFAULT
from integration_support.nvidia_surface import Param, root

#: Parameters ours take that PyTriton's do not (all keyword-only, after PyTriton's).
ADDED = {"access_token"}
#: Methods PyTriton's clients expose besides the public names.
DUNDERS = {"__init__", "__enter__", "__exit__", "__aenter__", "__aexit__"}


def _source(module: str) -> ast.Module:
    return ast.parse((root() / module).read_text())


class PyTritonClients:
    """PyTriton's client classes, as its source declares them."""

    def __init__(self) -> None:
        self.tree = _source("client/client.py")
        exported = _source("client/__init__.py")
        self.exported = sorted(
            alias.name
            for node in exported.body
            if isinstance(node, ast.ImportFrom)
            for alias in node.names
        )
        self.classes = {n.name: n for n in self.tree.body if isinstance(n, ast.ClassDef)}
        # Module-level constants, for defaults written as names.
        self.constants: Dict[str, Any] = {}
        for node in self.tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                try:
                    self.constants[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    pass

    def methods(self, name: str) -> Dict[str, ast.AST]:
        """The class's methods, inherited ones included (by PyTriton's own classes)."""
        cls = self.classes[name]
        found: Dict[str, ast.AST] = {}
        for base in cls.bases:
            if isinstance(base, ast.Name) and base.id in self.classes:
                found.update(self.methods(base.id))
        for node in cls.body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found[node.name] = node
        return found

    def default(self, node: Optional[ast.expr]) -> Any:
        if node is None:
            return _NO_DEFAULT
        try:
            return ast.literal_eval(node)
        except ValueError:
            text = ast.unparse(node)
            assert text in self.constants, f"PyTriton's default {text} is not a constant"
            return self.constants[text]

    def params(self, fn: Any) -> List[Param]:
        a = fn.args
        positional = a.posonlyargs + a.args
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        out = [
            (p.arg, _KINDS["posonly" if i < len(a.posonlyargs) else "arg"], self.default(d))
            for i, (p, d) in enumerate(zip(positional, defaults))
        ]
        if a.vararg:
            out.append((a.vararg.arg, _KINDS["vararg"], _NO_DEFAULT))
        out += [
            (p.arg, _KINDS["kwonly"], self.default(d)) for p, d in zip(a.kwonlyargs, a.kw_defaults)
        ]
        if a.kwarg:
            out.append((a.kwarg.arg, _KINDS["kwarg"], _NO_DEFAULT))
        return out


def _pytriton_kind(fn: Any) -> Tuple[str, str]:
    """(wrapper, call): wrapper "property", "classmethod" or "method"; call "plain",
    "coroutine" or "asyncgen"."""
    decorators = {ast.unparse(d) for d in fn.decorator_list}
    wrapper = next((w for w in ("property", "classmethod") if w in decorators), "method")
    if not isinstance(fn, ast.AsyncFunctionDef):
        return wrapper, "plain"
    own = [n for n in ast.walk(fn) if isinstance(n, (ast.Yield, ast.YieldFrom))]
    return wrapper, "asyncgen" if own else "coroutine"


def _our_member(cls: type, name: str) -> Tuple[str, str, Any]:
    member = inspect.getattr_static(cls, name)
    wrapper = "method"
    if isinstance(member, property):
        wrapper, member = "property", member.fget
    elif isinstance(member, classmethod):
        wrapper, member = "classmethod", member.__func__
    if inspect.isasyncgenfunction(member):
        call = "asyncgen"
    elif inspect.iscoroutinefunction(member):
        call = "coroutine"
    else:
        call = "plain"
    return wrapper, call, member


def _our_params(fn: Any) -> List[Param]:
    return [
        (p.name, p.kind, _NO_DEFAULT if p.default is p.empty else p.default)
        for p in inspect.signature(fn).parameters.values()
    ]


PYTRITON = PyTritonClients()


def test_every_pytriton_client_is_ours() -> None:
    assert PYTRITON.exported  # the comparison below has something to compare
    missing = [n for n in PYTRITON.exported if not hasattr(ours, n)]
    assert not missing, f"pybackend.pytriton.client lacks PyTriton's {missing}"


@pytest.mark.parametrize("name", PYTRITON.exported)
def test_methods_and_parameters_match_pytritons(name: str) -> None:
    cls = getattr(ours, name)
    problems: List[str] = []
    members = PYTRITON.methods(name)
    public = {m: fn for m, fn in members.items() if not m.startswith("_") or m in DUNDERS}
    assert "__init__" in public and len(public) > 3, sorted(public)
    for method, fn in sorted(public.items()):
        where = f"{name}.{method}"
        try:
            wrapper, call, mine = _our_member(cls, method)
        except AttributeError:
            problems.append(f"{where}: missing")
            continue
        if (wrapper, call) != _pytriton_kind(fn):
            problems.append(f"{where}: ours is {wrapper}/{call}, PyTriton's {_pytriton_kind(fn)}")
            continue
        theirs, ours_ = PYTRITON.params(fn), _our_params(mine)
        # Ours may add ADDED keyword-only parameters after PyTriton's (before **kwargs).
        extra = [p for p in ours_ if p[0] not in {t[0] for t in theirs}]
        for p in extra:
            if p[0] not in ADDED or p[1] is not inspect.Parameter.KEYWORD_ONLY:
                problems.append(f"{where}: parameter {p[0]} is not PyTriton's")
        ours_ = [p for p in ours_ if p not in extra]
        if ours_ != theirs:
            problems.append(f"{where}: ours {ours_}, PyTriton's {theirs}")
    assert not problems, "\n".join(problems)


def test_the_comparison_sees_a_difference() -> None:
    # What the test above reads is what the code says: a changed default is seen.
    fn = PYTRITON.methods("FuturesModelClient")["__init__"]
    theirs = PYTRITON.params(fn)
    assert ("max_queue_size", inspect.Parameter.KEYWORD_ONLY, 128) in theirs
    assert ("model_version", inspect.Parameter.POSITIONAL_OR_KEYWORD, None) in theirs
    assert _pytriton_kind(PYTRITON.methods("AsyncioModelClient")["model_config"]) == (
        "property",
        "coroutine",
    )
    assert _pytriton_kind(PYTRITON.methods("AsyncioDecoupledModelClient")["infer_sample"]) == (
        "method",
        "asyncgen",
    )
