"""pybackend.pytriton's public surface held to the installed NVIDIA PyTriton's: every
public module user code imports exists under ``pybackend.pytriton`` with every public name
of PyTriton's module, of the same kind (function, class, enum, constant), with compatible
signatures (PyTriton's parameters by name, kind, position and default; ours may add
parameters with defaults), dataclass fields, enum members, methods (same wrapper:
property, classmethod; same async-ness) and exception bases. What we leave out on purpose
is in INTERNAL_MODULES and OMITTED, each with the reason docs/pytriton.md gives; a new
name in a future PyTriton, or one of ours that drifts, fails here. PyTriton is read from
its source (tests/integration_support/nvidia_surface.py), never imported."""

from __future__ import annotations

import dataclasses
import enum
import importlib
import inspect
from typing import Any, Dict, List, Optional

import pytest

from integration_support import nvidia_surface as nv

#: Module prefixes that are PyTriton's own machinery, which its users do not import.
INTERNAL_MODULES = {
    "pytriton.__main__": "the `pytriton` command (the environment check)",
    "pytriton.check": "the environment check behind `pytriton check`",
    "pytriton.models": "its model store: the proxy model.py files it writes",
    "pytriton.proxy.": "its proxy between tritonserver and the user's process (ZeroMQ, "
    "shared memory): ours has none; `proxy.types` is public and mirrored",
    "pytriton.server": "its tritonserver launcher; ours is pybackend.server",
    "pytriton.utils": "its helpers (workspace, distribution paths, kwonly_dataclass)",
}
PUBLIC_MODULE_EXCEPTIONS = {"pytriton.proxy.types"}

#: "module:name" -> why pybackend.pytriton does not provide it (docs/pytriton.md).
OMITTED = {
    "pytriton.client.client:BaseModelClient": "ours share no base class; "
    "the five client classes are provided",
    "pytriton.client.asyncio_utils:aio_clients": "asyncio_utils is the asyncio clients' "
    "internals; ours are built on the blocking clients",
    "pytriton.client.asyncio_utils:asyncio_get_model_state": "as aio_clients",
    "pytriton.client.asyncio_utils:asyncio_get_model_config": "as aio_clients",
    "pytriton.client.asyncio_utils:asyncio_wait_for_server_ready": "as aio_clients",
    "pytriton.client.asyncio_utils:asyncio_wait_for_model_status_loaded": "as aio_clients",
    "pytriton.client.asyncio_utils:asyncio_wait_for_model_ready": "as aio_clients",
    "pytriton.model_config.generator:LOGGER": "generator.py writes PyTriton's proxy "
    "config.pbtxt; ours is written by pybackend/pytriton/_config.py",
    "pytriton.model_config.generator:ModelConfigGenerator": "as LOGGER",
    "pytriton.proxy.types:ResponsesOrError": "proxy internals",
    "pytriton.proxy.types:ResponsesNoneOrError": "proxy internals",
    "pytriton.proxy.types:Scope": "proxy internals",
    "pytriton.proxy.types:Request.traced_span": "OpenTelemetry tracing of the proxy",
    "pytriton.triton:TritonBase": "Triton and RemoteTriton share no base class here",
    "pytriton.triton:TRITONSERVER_DIST_DIR": "the wheel's server is found by pybackend.server",
    "pytriton.triton:WAIT_FORM_MODEL_TIMEOUT_S": "PyTriton's proxy internals",
    "pytriton.triton:INITIAL_BACKEND_SHM_SIZE": "no proxy shared memory here",
    "pytriton.triton:GROWTH_BACKEND_SHM_SIZE": "no proxy shared memory here",
    "pytriton.triton:MODEL_URL": "PyTriton's HTTP paths for its readiness probes",
    "pytriton.triton:MODEL_READY_URL": "as MODEL_URL",
    "pytriton.triton:MODEL_CONFIG_URL": "as MODEL_URL",
    "pytriton.triton:MODEL_INFER_URL": "as MODEL_URL",
}

#: "module:name[.member]" -> a difference that is deliberate (docs/pytriton.md).
DIFFERENT: Dict[str, str] = {
    "pytriton.proxy.types:Response": "a callable returns plain dicts; ours is the alias "
    "Dict[str, np.ndarray], not PyTriton's wrapper dataclass of its proxy",
    "pytriton.triton:Triton.__init__": "triton_lifecycle_policy defaults to "
    "DefaultTritonLifecyclePolicy (PyTriton: None, which means the same; None works here too)",
}


def _internal(module: str) -> bool:
    if module in PUBLIC_MODULE_EXCEPTIONS:
        return False
    return any(module == p.rstrip(".") or module.startswith(p) for p in INTERNAL_MODULES)


def _public_modules() -> List[str]:
    names = nv.module_names()
    private = [m for m in names if any(p.startswith("_") for p in m.split(".")[1:])]
    return [m for m in names if m not in private and not _internal(m)]


PUBLIC_MODULES = _public_modules()


def _ours(module: str) -> Any:
    return importlib.import_module("pybackend." + module)


def _params(fn: Any) -> List[nv.Param]:
    return [
        (p.name, p.kind, nv.NO_DEFAULT if p.default is p.empty else p.default)
        for p in inspect.signature(fn).parameters.values()
    ]


def _default_ok(theirs: Any, ours: Any) -> bool:
    if theirs == nv.NO_DEFAULT:
        return True  # ours may default what PyTriton requires
    if theirs == nv.SOME_DEFAULT:
        return ours != nv.NO_DEFAULT
    return bool(ours == theirs)


def params_problem(theirs: List[nv.Param], ours: List[nv.Param]) -> Optional[str]:
    """Why a call written for PyTriton's signature may fail on ours (None: it may not)."""
    P = inspect.Parameter
    by_name = {p[0]: p for p in ours}
    positional = [p[0] for p in ours if p[1] in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)]
    their_positional = [
        p[0] for p in theirs if p[1] in (P.POSITIONAL_ONLY, P.POSITIONAL_OR_KEYWORD)
    ]
    if positional[: len(their_positional)] != their_positional:
        return f"positional parameters {positional}, PyTriton's {their_positional}"
    for name, kind, default in theirs:
        if kind in (P.VAR_POSITIONAL, P.VAR_KEYWORD):
            if not any(p[1] is kind for p in ours):
                return f"no {kind.description} parameter (PyTriton's *{name})"
            continue
        mine = by_name.get(name)
        if mine is None:
            if not any(p[1] is P.VAR_KEYWORD for p in ours) or kind is P.POSITIONAL_ONLY:
                return f"no parameter {name}"
            continue
        if kind is P.KEYWORD_ONLY and mine[1] not in (P.KEYWORD_ONLY, P.POSITIONAL_OR_KEYWORD):
            return f"{name} is {mine[1].description}, PyTriton's keyword-only"
        if not _default_ok(default, mine[2]):
            return f"{name} defaults to {mine[2]!r}, PyTriton's to {default!r}"
    theirs_names = {p[0] for p in theirs}
    for name, kind, default in ours:
        extra = name not in theirs_names and kind not in (P.VAR_POSITIONAL, P.VAR_KEYWORD)
        if extra and default == nv.NO_DEFAULT:
            return f"parameter {name} is required (PyTriton has none)"
    return None


def _wrapper(cls: type, name: str) -> Any:
    for klass in cls.__mro__:
        if name in vars(klass):
            member = vars(klass)[name]
            if isinstance(member, property):
                return "property", member.fget
            if isinstance(member, classmethod):
                return "classmethod", member.__func__
            if isinstance(member, staticmethod):
                return "staticmethod", member.__func__
            return "method", member
    raise AttributeError(name)


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.isasyncgenfunction(fn)


def class_problems(theirs: nv.Name, ours: type) -> List[str]:
    problems = []
    key = f"{theirs.module}:{theirs.name}"
    for method, spec in theirs.methods.items():
        where = f"{key}.{method}"
        if where in OMITTED or where in DIFFERENT:
            continue
        if method == "__init__" and theirs.kind == "dataclass":
            continue  # its fields are compared below
        try:
            wrapper, fn = _wrapper(ours, method)
        except AttributeError:
            problems.append(f"{where}: missing")
            continue
        if (wrapper, _is_async(fn)) != (spec.wrapper, spec.is_async):
            problems.append(f"{where}: {wrapper} async={_is_async(fn)}, PyTriton's {spec}")
        elif (why := params_problem(spec.params, _params(fn))) is not None:
            problems.append(f"{where}: {why}")
    if theirs.kind == "dataclass" and f"{key}.__init__" not in DIFFERENT:
        fields = [(n, nv.KINDS["arg"], d) for n, d in theirs.fields]
        if (why := params_problem(fields, _params(ours))) is not None:
            problems.append(f"{key} fields: {why}")
    return problems


def name_problems(theirs: nv.Name, ours_module: Any, siblings: Dict[str, nv.Name]) -> List[str]:
    key = f"{theirs.module}:{theirs.name}"
    if key in DIFFERENT:
        return []
    if not hasattr(
        ours_module, theirs.name.split(".")[0] if theirs.kind != "import" else theirs.name
    ):
        return [f"{key}: missing"]
    ours = getattr(ours_module, theirs.name)
    if theirs.kind == "function":
        if not callable(ours) or _is_async(ours) != theirs.is_async:
            return [f"{key}: not a{'n async' if theirs.is_async else ''} function"]
        why = params_problem(theirs.params, _params(ours))
        return [f"{key}: {why}"] if why else []
    if theirs.kind == "decorator":
        return [] if callable(ours) else [f"{key}: not callable"]
    if theirs.kind == "enum":
        if not (inspect.isclass(ours) and issubclass(ours, enum.Enum)):
            return [f"{key}: not an enum"]
        mine = {m.name: m.value for m in ours}
        return [
            f"{key}.{m}: {mine.get(m, 'missing')!r}, PyTriton's {v!r}"
            for m, v in theirs.members.items()
            if v != nv.SOME_DEFAULT and mine.get(m) != v
        ]
    if theirs.kind in ("class", "dataclass"):
        if not inspect.isclass(ours):
            return [f"{key}: not a class"]
        problems = class_problems(theirs, ours)
        for base in theirs.bases:  # same hierarchy among the module's own classes
            sibling = siblings.get(base)
            if f"{theirs.module}:{base}" in OMITTED:
                continue
            if sibling is not None and not issubclass(ours, getattr(ours_module, base, ())):
                problems.append(f"{key}: not a subclass of {base}")
        return problems
    if theirs.kind == "value" and theirs.value != nv.SOME_DEFAULT and ours != theirs.value:
        return [f"{key}: {ours!r}, PyTriton's {theirs.value!r}"]
    return []


def test_the_surface_is_read() -> None:
    # What the tests below compare is there: modules, and names of every kind.
    assert "pytriton.client.utils" in PUBLIC_MODULES and "pytriton.proxy.types" in PUBLIC_MODULES
    assert "pytriton.proxy.data" not in PUBLIC_MODULES and "pytriton.server" not in PUBLIC_MODULES
    utils = nv.public_names("pytriton.client.utils")
    assert utils["TritonUrl"].kind == "dataclass" and utils["ModelState"].kind == "enum"
    assert utils["wait_for_model_ready"].params[3] == ("timeout_s", nv.KINDS["arg"], None)
    assert nv.public_names("pytriton.decorators")["batch"].kind == "decorator"


def test_omissions_are_current() -> None:
    # An allow-list entry names something PyTriton has and ours lacks; else it is stale.
    stale = []
    for key in OMITTED:
        module, name = key.split(":")
        cls, _, member = name.partition(".")
        theirs = nv.public_names(module).get(cls)
        present = theirs is not None and (not member or member in theirs.methods)
        ours = (
            getattr(_ours(module), cls, None)
            if importlib.util.find_spec("pybackend." + module)
            else None
        )
        if member and ours is not None:
            ours = getattr(ours, member, None)
        if not present or ours is not None:
            stale.append(f"{key}: PyTriton has it: {present}; ours has it: {ours is not None}")
    assert not stale, "\n".join(stale)


@pytest.mark.parametrize("module", PUBLIC_MODULES)
def test_module_matches_pytritons(module: str) -> None:
    names = nv.public_names(module)
    keep = {n: v for n, v in names.items() if f"{module}:{n}" not in OMITTED}
    if not keep:
        return  # everything it has is omitted (asyncio_utils, generator)
    ours = _ours(module)
    problems = [p for v in keep.values() for p in name_problems(v, ours, names)]
    assert not problems, "\n".join(problems)


def test_the_comparison_sees_a_difference() -> None:
    # A missing parameter, a changed default, a required extra one and a moved positional
    # parameter are each reported; keyword-only ones added with a default are not.
    P = inspect.Parameter
    theirs = [("url", P.POSITIONAL_OR_KEYWORD, nv.NO_DEFAULT), ("t", P.KEYWORD_ONLY, 1.0)]
    assert params_problem(theirs, theirs) is None
    assert params_problem(theirs, theirs + [("x", P.KEYWORD_ONLY, None)]) is None
    assert "no parameter t" in str(params_problem(theirs, theirs[:1]))
    assert "defaults" in str(params_problem(theirs, [theirs[0], ("t", P.KEYWORD_ONLY, 2.0)]))
    assert "required" in str(
        params_problem(theirs, theirs + [("x", P.KEYWORD_ONLY, nv.NO_DEFAULT)])
    )
    moved = [("x", P.POSITIONAL_OR_KEYWORD, None)] + theirs
    assert "positional" in str(params_problem(theirs, moved))

    @dataclasses.dataclass
    class Url:
        scheme: str
        port: int = 1

    spec = nv.public_names("pytriton.client.utils")["TritonUrl"]
    assert any("fields" in p for p in class_problems(spec, Url))
