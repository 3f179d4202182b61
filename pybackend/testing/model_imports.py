"""How the in-process harness imports a model's files so that the models of one process
(pytest's, or devserve's) stay apart, as each model version has a stub process of its own.

A stub imports ``model.py`` as ``1.model`` with its version and model directories appended
to ``sys.path``, so the model's own modules also import by plain name (``import helpers``
finds ``1/helpers.py``). In one process those plain names would be shared: a second model's
``import helpers`` got the first model's module from ``sys.modules``. So each model version
gets two packages of its own: ``<package>`` for ``model.py`` and what it imports relatively
(``<package>.sibling``), and ``<package>_plain`` over its version and model directories for
what it imports by plain name (``<package>_plain.helpers``). Every module of both packages
runs with its own ``__import__`` (a copy of the builtins that routes the model's plain names
there; a module's builtins are its globals' ``__builtins__``), so ``import helpers`` anywhere
in the model's files, at import or later in ``execute``, finds the model's own file.

What stays as in a stub process: a name that the interpreter's own paths (the standard
library, site-packages) provide is theirs, as those come first on a stub's ``sys.path``; and
a module of the model's that the test itself imported by plain name (to patch it, say) is
the one the model gets. ``importlib.import_module("helpers")`` bypasses ``__import__`` and
resolves through ``sys.path`` as before."""

from __future__ import annotations

import builtins
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import threading
import types
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

PREFIX = "_pybackend_harness_"
_real_import = builtins.__import__
_lock = threading.Lock()
_namespaces: Dict[str, "ModelImports"] = {}  # top package (either of a model's two) -> it


def _package_name(version_dir: Path, runtime_dir: Optional[Path] = None) -> str:
    """The package ``model.py`` of ``version_dir`` (or of the python-based backend in
    ``runtime_dir`` that runs it) is imported in (its plain names' is that with ``_plain``)."""
    key = str(version_dir) if runtime_dir is None else f"{version_dir}\0{runtime_dir}"
    return f"{PREFIX}{abs(hash(key))}"


class ModelImports:
    """The import namespace of one model version (its ``version_dir``): its own files, or
    the files of the python-based backend that runs it (``runtime_dir``: one namespace per
    model version too, as each model of a runtime has stub processes of its own; a stub
    imports the runtime's ``model.py`` with only that directory appended to ``sys.path``)."""

    def __init__(self, version_dir: Path, runtime_dir: Optional[Path] = None) -> None:
        self.version_dir = version_dir
        self.package = _package_name(version_dir, runtime_dir)
        self.plain = self.package + "_plain"
        if runtime_dir is None:
            self.dirs = [str(version_dir), str(version_dir.parent)]
        else:
            self.dirs = [str(runtime_dir)]
        self.builtins: Dict[str, Any] = dict(vars(builtins))
        self.builtins["__import__"] = self._import
        self._own: Dict[str, bool] = {}  # top-level name -> a file of the model's
        for name, path in ((self.package, self.dirs[:1]), (self.plain, self.dirs)):
            if name not in sys.modules:
                module = types.ModuleType(name)
                module.__path__ = list(path)  # type: ignore[attr-defined]
                sys.modules[name] = module

    def import_model(self, stem: str) -> types.ModuleType:
        return importlib.import_module(f"{self.package}.{stem}")

    def _import(
        self,
        name: str,
        globals: Optional[Dict[str, Any]] = None,
        locals: Optional[Dict[str, Any]] = None,
        fromlist: Sequence[str] = (),
        level: int = 0,
    ) -> Any:
        if level == 0 and name and self._is_own(name.partition(".")[0]):
            if not _of(sys.modules.get(name), self.dirs):  # else the test's import of it
                module = _real_import(f"{self.plain}.{name}", globals, locals, fromlist, 0)
                if fromlist:
                    return module
                return sys.modules[f"{self.plain}.{name.partition('.')[0]}"]
        return _real_import(name, globals, locals, fromlist, level)

    def _is_own(self, head: str) -> bool:
        own = self._own.get(head)
        if own is None:
            own = (
                head not in sys.builtin_module_names
                and importlib.machinery.PathFinder.find_spec(head, _interpreter_paths()) is None
                and importlib.machinery.PathFinder.find_spec(head, self.dirs) is not None
            )
            self._own[head] = own
        return own


def _of(module: Optional[types.ModuleType], dirs: List[str]) -> bool:
    """Whether ``module`` was loaded from a file in one of ``dirs``."""
    origin = getattr(module, "__file__", None) or ""
    return any(origin.startswith(d + os.sep) for d in dirs)


def _interpreter_paths() -> List[str]:
    """The entries of ``sys.path`` that belong to the interpreter (below its prefixes:
    the standard library, site-packages), which precede a model's directories in a stub."""
    roots = {
        os.path.realpath(r)
        for r in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix)
    }
    return [
        p for p in sys.path if p and any(os.path.realpath(p).startswith(r + os.sep) for r in roots)
    ]


class _OwnBuiltins(importlib.abc.Loader):
    """A model module's loader: the file's own, with the model's builtins put in the
    module's globals before its code runs."""

    def __init__(self, inner: Any, namespace: ModelImports) -> None:
        self._inner = inner
        self._namespace = namespace

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Optional[types.ModuleType]:
        return self._inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        module.__dict__["__builtins__"] = self._namespace.builtins
        self._inner.exec_module(module)

    def __getattr__(self, name: str) -> Any:  # get_source, get_resource_reader...
        return getattr(self._inner, name)


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the modules of the models' packages where the path finder does, and gives
    them the model's builtins."""

    def find_spec(
        self, fullname: str, path: Optional[Sequence[str]], target: Any = None
    ) -> Optional[importlib.machinery.ModuleSpec]:
        if not fullname.startswith(PREFIX) or path is None:
            return None
        namespace = _namespaces.get(fullname.partition(".")[0])
        if namespace is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path, target)
        if spec is not None and hasattr(spec.loader, "exec_module") and spec.has_location:
            spec.loader = _OwnBuiltins(spec.loader, namespace)
        return spec


_finder = _Finder()


def namespace_of(version_dir: Path, runtime_dir: Optional[Path] = None) -> ModelImports:
    """The import namespace of the model version in ``version_dir`` (made once), whose
    code is the python-based backend's in ``runtime_dir`` when given."""
    with _lock:
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        namespace = _namespaces.get(_package_name(version_dir, runtime_dir))
        if namespace is None:
            namespace = ModelImports(version_dir, runtime_dir)
            _namespaces[namespace.package] = _namespaces[namespace.plain] = namespace
        return namespace


def forget(version_dir: Path) -> None:
    """Drop what was imported for ``version_dir``'s model (its files, or its runtime's), so
    that its next import reads the files as they are now (a reload)."""
    with _lock:
        for namespace in {n for n in _namespaces.values() if n.version_dir == version_dir}:
            _namespaces.pop(namespace.package, None)
            _namespaces.pop(namespace.plain, None)
            for top in (namespace.package, namespace.plain):
                for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                    del sys.modules[name]
