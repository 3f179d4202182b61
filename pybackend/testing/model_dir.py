"""A model directory as the server reads it: which version's ``model.py`` runs, the model's
name, its configuration (config.pbtxt with the server's defaults) and the first instance's
name. The in-process harness and the stub-process model both start from it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Iterable, Optional, Sequence, Union

from ..utils.config_rules import other_backend, runtime_backend
from ..utils.errors import TritonModelException
from ..utils.helpers import using_decoupled_model_transaction_policy
from ..utils.model_versions import no_served_version_text, served_versions, versions
from .config import load_config, model_file_name, normalize
from .sequence import CorrelationId, Sequences
from .statistics import InferenceStatistics, batch_size_of


class ModelOnDisk:
    """The model in ``model_dir`` (``<model_dir>/<version>/model.py`` and
    ``<model_dir>/config.pbtxt``) before it starts. ``version``: when not given, the highest
    its ``version_policy`` serves (the highest on disk by default), as a request that names
    none reaches; ``config``: a dict instead of config.pbtxt; ``model_file``: the file to
    run instead of the one the server runs (the config's ``default_model_filename``, else
    ``model.py``); ``runtime``: the directory of the python-based backend whose
    ``model.py`` runs the model (the one its config's ``backend`` names:
    ``backends/<name>``; docs/python_based_backends.md)."""

    def __init__(
        self,
        model_dir: Union[str, Path],
        *,
        version: Optional[int] = None,
        config: Optional[Dict[str, Any]] = None,
        model_name: Optional[str] = None,
        instance_name: Optional[str] = None,
        model_file: Optional[str] = None,
        auto_complete: bool = True,
        runtime: Union[str, Path, None] = None,
    ) -> None:
        self.model_dir = Path(model_dir).resolve()
        #: Whether starting runs ``auto_complete_config`` (the server runs it once per
        #: model: another instance of a started model starts from its completed config).
        self.auto_complete = auto_complete
        raw = dict(config) if config is not None else load_config(self.model_dir)
        self.model_name: str = model_name or raw.get("name") or self.model_dir.name
        if version is None:
            version = served_version(self.model_dir, raw, self.model_name)
        self.version = version
        self.version_dir = self.model_dir / str(self.version)
        #: The python-based backend's directory when its ``model.py`` runs the model.
        self.runtime_dir = runtime_of(raw, self.model_name, runtime)
        self.config: Dict[str, Any] = normalize(raw, self.model_name)
        if self.runtime_dir is None:
            self.model_file = self.version_dir / (model_file or model_file_name(self.config))
        else:
            self.model_file = self.runtime_dir / "model.py"
        # The first instance of the first group, named as the server names it.
        self.instance_name = instance_name or f"{self.config['instance_group'][0]['name']}_0"
        self._sequences: Optional[Sequences] = None
        self._sequences_of: Optional[Dict[str, Any]] = None  # the config it was made for
        #: What tritonserver's statistics endpoint would say of this model (statistics.py).
        self.statistics = InferenceStatistics()

    def admit_sequence(self, correlation_id: CorrelationId, flags: int) -> Dict[str, Any]:
        """The sequence batcher's checks of a request (raises InferError) and the control
        inputs it adds (sequence.py)."""
        if self._sequences is None or self._sequences_of is not self.config:
            self._sequences = Sequences(self.config, self.model_name)
            self._sequences_of = self.config
        return self._sequences.admit(correlation_id, flags)

    def batch_size(self, shapes: Iterable[Sequence[int]]) -> int:
        """A request's batch size for the statistics (its inputs' ``shapes``)."""
        return batch_size_of(int(self.config.get("max_batch_size", 0) or 0), shapes)

    @property
    def decoupled(self) -> bool:
        return bool(using_decoupled_model_transaction_policy(self.config))


def runtime_of(
    config: Dict[str, Any], model_name: str, runtime: Union[str, Path, None]
) -> Optional[Path]:
    """The directory of the python-based backend that runs the model, checked against the
    backend its config names as tritonserver finds it: a backend other than python needs
    ``runtime=`` (its directory holding ``model.py``), and ``runtime=`` a config that names
    such a backend."""
    backend = other_backend(config)
    if runtime is None:
        if backend and not runtime_backend(config):
            raise TritonModelException(
                f"model '{model_name}' is for backend '{backend}', not Python: the offline "
                "engines run Python models (and python-based backends' models, with "
                "runtime=); serve it with tritonserver (ServerModel)"
            )
        if backend:
            raise TritonModelException(
                f"unable to find backend library for backend '{backend}', try specifying "
                f"runtime on the model configuration. (model '{model_name}'; offline, a "
                f"python-based backend's model runs with runtime=<the directory of its "
                f"model.py>, as tritonserver finds it in backends/{backend}/; "
                "docs/python_based_backends.md)"
            )
        return None
    path = Path(runtime).resolve()
    if not backend:
        raise TritonModelException(
            f"runtime='{path}' is the model.py of a python-based backend, but model "
            f"'{model_name}' names no backend but python, whose model runs its own "
            f'<version>/model.py: set backend: "{path.name}" in its config.pbtxt (the '
            "backend directory tritonserver finds the runtime in), or leave runtime= out"
        )
    if not (path / "model.py").is_file():
        raise TritonModelException(
            f"unable to find backend library for backend '{backend}', try specifying "
            f"runtime on the model configuration. (model '{model_name}': no model.py in "
            f"runtime='{path}')"
        )
    return path


def served_version(model_dir: Path, config: Dict[str, Any], model_name: str) -> int:
    """The version a request that names none reaches: the highest the model's
    ``version_policy`` serves (the highest on disk by default)."""
    there = versions(model_dir)
    if not there:
        raise TritonModelException(f"no version directory (e.g. '1/') in '{model_dir}'")
    served = served_versions(model_dir, config)
    if not served:
        raise TritonModelException(
            f"{no_served_version_text(model_name)} (its version_policy picks none of the "
            f"versions in '{model_dir}': {there}; name one there, or pass version=)"
        )
    return served[-1]
