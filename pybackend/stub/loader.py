"""Importing ``model.py`` and bringing ``TritonPythonModel`` up, exactly the way the
original stub does (spec §2.1 and §10.1)."""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from types import ModuleType
from typing import Any, Callable, Dict

from ..errors import PybackendError
from ..utils import c_module
from ..utils.model_config import ModelConfig

# The 7 keys of ``args`` passed to initialize(), and where InitArgs keeps each value.
_INIT_ARG_KEYS = {
    "model_config": "model_config",
    "model_instance_kind": "instance_kind",
    "model_instance_name": "instance_name",
    "model_instance_device_id": "device_id",
    "model_repository": "model_repository",
    "model_version": "model_version",
    "model_name": "model_name",
}

UTILS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


class LoadError(PybackendError):
    """A load failure with a message that needs no traceback."""


# The original's texts for a model.py that cannot serve, written once: the stub, the
# offline engines and `pybackend validate` (which finds them by reading the file) use them.
def missing_file_text(model_file: object) -> str:
    return f"Python model file not found in '{model_file}'"


def no_class_text(model_file: object) -> str:
    return f"Python model '{model_file}' does not define class 'TritonPythonModel'."


def no_execute_text(model_file: object) -> str:
    return f"Python model {model_file} does not implement `execute` method."


def _append_path(path: str) -> None:
    if path:
        sys.path.append(path)


def import_model(init: Dict[str, Any]) -> ModuleType:
    # The original's C++ module, by its name (model code may import it).
    sys.modules.setdefault("c_python_backend_utils", c_module)
    model_file = init["model_file"]
    runtime_dir = init.get("runtime_modeldir") or "DEFAULT"
    if runtime_dir != "DEFAULT":
        # A python-based backend: its model.py lives in the backend directory.
        _append_path(runtime_dir)
        return importlib.import_module("model")
    if not os.path.isfile(model_file):
        raise LoadError(missing_file_text(model_file))
    version_dir = os.path.dirname(model_file)
    model_dir = os.path.dirname(version_dir)
    _append_path(version_dir)
    _append_path(model_dir)
    _append_path(UTILS_DIR)
    stem = os.path.splitext(os.path.basename(model_file))[0]
    # "<version>.<stem>", e.g. "1.model": a namespace-package import, so model.py may
    # use relative imports of its siblings.
    return importlib.import_module(f"{os.path.basename(version_dir)}.{stem}")


def model_class(module: ModuleType) -> type:
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise LoadError(no_class_text(module.__file__))
    return cls


def auto_complete(module: ModuleType, init: Dict[str, Any]) -> str:
    """Run ``TritonPythonModel.auto_complete_config`` (on the class) when present and
    return the resulting model configuration as JSON text."""
    cls = model_class(module)
    config = ModelConfig(init["model_config"])
    if hasattr(cls, "auto_complete_config"):
        config = cls.auto_complete_config(config)
        if not isinstance(config, ModelConfig):
            raise LoadError(
                f"auto_complete_config function in model '{init['model_name']}' must return a "
                "valid "
                "pb.ModelConfig object."
            )
    return json.dumps(config._model_config)


def initialize_args(init: Dict[str, Any]) -> Dict[str, str]:
    return {key: str(init.get(src, "")) for key, src in _INIT_ARG_KEYS.items()}


def instantiate(
    module: ModuleType, init: Dict[str, Any], run_coroutine: Callable[[Any], Any]
) -> Any:
    """Construct the model and call ``initialize(args)``; a coroutine returned by an
    ``async def initialize`` runs on the instance's event loop (``run_coroutine``)."""
    model = model_class(module)()
    if hasattr(model, "initialize"):
        result = model.initialize(initialize_args(init))
        if inspect.iscoroutine(result):
            run_coroutine(result)
    return model


def is_async_execute(model: Any) -> bool:
    execute = getattr(model, "execute", None)
    return execute is not None and inspect.iscoroutinefunction(execute)
