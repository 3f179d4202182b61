"""`pybackend validate PATH`: which models PATH holds (PATH is one model directory or a
repository of them) and every check on each, in the order the server meets them: the
config's text, the config, the parameters, then model.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional

from ..errors import PybackendError
from ..testing.config import ConfigSyntaxError, model_file_name, normalize, parse_config
from ..utils.config_rules import other_backend, parameters, runtime_backend
from ..utils.model_versions import served_versions
from . import config_checks, parameter_checks, source_checks
from .findings import ERROR, NOTE, ModelReport

#: ``--run``'s checks (run_checks.check_run), given the report, config and model file.
RunCheck = Callable[[ModelReport, Dict[str, Any], Path], Optional[Dict[str, Any]]]


class ValidateError(PybackendError):
    """PATH holds no model to check."""


def is_model_dir(path: Path) -> bool:
    return (path / "config.pbtxt").is_file() or any(
        p.is_dir() and p.name.isdigit() for p in path.iterdir()
    )


def model_dirs(path: Path) -> List[Path]:
    if not path.is_dir():
        raise ValidateError(f"{path} is not a directory (give a model directory or a repository)")
    if is_model_dir(path):
        return [path]
    found = sorted(p for p in path.iterdir() if p.is_dir() and is_model_dir(p))
    if not found:
        raise ValidateError(
            f"{path} holds no model: a model directory has config.pbtxt or a version "
            "directory (1/model.py), a repository has model directories"
        )
    return found


def not_models(path: Path) -> List[Path]:
    """The directories of repository ``path`` that hold no model (``.pytest_cache``, a
    notebook's checkpoints, ``.git``): tritonserver takes every directory of a repository
    for a model, hidden ones included."""
    if is_model_dir(path):
        return []
    return sorted(p for p in path.iterdir() if p.is_dir() and not is_model_dir(p))


def not_a_model(path: Path) -> ModelReport:
    """What the server says of a directory of the repository that holds no model: in its
    default model control mode (none, or poll) its start fails on it. A dotted name is read
    as ``model.<backend>`` and then has no version; any other has no backend."""
    name = path.name
    if "." in name:
        text = f"at least one version must be available under the version policy of model '{name}'"
    else:
        text = (
            f"Invalid model name: Could not determine backend for model '{name}' with no "
            "backend in model configuration. Expected model name of the form "
            "'model.<backend_name>'."
        )
    report = ModelReport(name, path)
    report.add(
        ERROR,
        "not-a-model",
        f"{text} (tritonserver takes every directory of the repository for a model, so its "
        "start fails on this one unless models are loaded explicitly: move the directory out "
        "of the repository)",
    )
    return report


def validate(
    path: Path, run: bool = False, runtimes: Optional[Mapping[str, Path]] = None
) -> List[ModelReport]:
    """Every model of ``path``, then the directories beside them that hold none; ``run``:
    also loaded through the offline harness, all of them before any request (so that BLS
    calls find the others), one request each. ``runtimes``: python-based backends by name,
    whose ``model.py`` runs the models that name them (docs/python_based_backends.md)."""
    models = model_dirs(path)  # first: it says what is wrong with a PATH that is no directory
    others = [not_a_model(d) for d in not_models(path)]
    runtimes = {name: Path(p).resolve() for name, p in (runtimes or {}).items()}
    if not run:
        return [validate_model(d, runtimes=runtimes) for d in models] + others
    from .run_checks import Runner

    runner = Runner()
    try:
        reports = [validate_model(d, runner, runtimes) for d in models]
        runner.request_all()
    finally:
        runner.close()
    return reports + others


def validate_model(
    model_dir: Path,
    run: Optional[RunCheck] = None,
    runtimes: Optional[Mapping[str, Path]] = None,
) -> ModelReport:
    report = _checked(model_dir, run, runtimes or {})
    # In reading order: the model, config.pbtxt, then model.py, each by line.
    place = {"": 0, "config.pbtxt": 1}
    report.findings.sort(key=lambda f: (place.get(f.file, 2), f.file, f.line))
    return report


def _checked(model_dir: Path, run: Optional[RunCheck], runtimes: Mapping[str, Path]) -> ModelReport:
    report = ModelReport(model_dir.name, model_dir)
    file = model_dir / "config.pbtxt"
    text = file.read_text(errors="replace") if file.is_file() else ""
    try:
        config = parse_config(text, "config.pbtxt")
    except ConfigSyntaxError as e:
        report.add(
            ERROR,
            "config-syntax",
            f"failed to read text proto: {e.reason}",
            "config.pbtxt",
            e.line,
            e.column,
        )
        return report
    other = other_backend(config)
    runtime = runtimes.get(other) if other else None
    if other and runtime is None:
        hint = (
            f"; a python-based backend's model is checked with --runtime {other}=<the "
            "directory of its model.py>"
            if runtime_backend(config)
            else ""
        )
        report.skipped = f"not a Python model (backend '{other}'{hint})"
        return report
    config_checks.check_refusals(report, text, config)
    if not file.is_file():
        report.add(NOTE, "config", "no config.pbtxt: the model's auto_complete_config makes it")
    config_checks.check_identity(report, text, config)
    config_checks.check_batching(report, text, config)
    config_checks.check_instance_groups(report, text, config)
    parameter_checks.check_parameters(report, text, config)
    versions = served_versions(model_dir, config)
    # The file the server runs (a TensorFlow platform names another, even for backend python).
    model_file = model_file_name(normalize(config, report.name))
    trees = {}
    # A runtime's model.py runs every version (each reads its own files from its directory).
    paths = (
        [runtime / "model.py"] if runtime else [model_dir / str(v) / model_file for v in versions]
    )
    for path in paths:
        tree = source_checks.parse_model(report, path)
        if tree is not None:
            trees[path] = tree
            source_checks.check_class(report, path, tree)
            env = parameters(config).get("EXECUTION_ENV_PATH", "")
            source_checks.check_imports(report, path, tree, env, runtime is not None)
    completes = any(_completes(tree) for tree in trees.values())
    completed = None
    if run is not None and trees and not report.count(ERROR):
        # The configuration auto_complete_config made is the one the server checks.
        completed = run(report, config, next(iter(trees)))
    if completed is not None:
        config = completed
    elif completes:  # what the method would add is not known: only whole tensors checked
        if run is None:
            report.add(
                NOTE,
                "auto-complete",
                "model.py has auto_complete_config, which may add inputs, outputs and dims: "
                "they are checked with --run, on the configuration it makes",
            )
        tensors = (config.get("input") or []) + (config.get("output") or [])
        if tensors and all(_whole(t) for t in tensors):  # nothing there to complete
            config_checks.check_tensors(report, text, config)
        return report
    config_checks.check_tensors(report, text, config)
    for path, tree in trees.items():
        source_checks.check_names(report, path, tree, config)
        source_checks.check_hooks(report, path, tree, config)
    return report


def _completes(tree: Any) -> bool:
    cls, _ = source_checks.model_class(tree)
    return cls is not None and "auto_complete_config" in source_checks.methods(cls)


def _whole(tensor: Dict[str, Any]) -> bool:
    return tensor.get("data_type", "TYPE_INVALID") != "TYPE_INVALID" and bool(tensor.get("dims"))
