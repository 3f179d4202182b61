"""The configurations tritonserver (2.51, either backend) refuses to load, as rules on the
model configuration that return what they find instead of raising: the offline engines
(testing/load_checks.py) raise the first as their load error, `pybackend validate` reports
them all at their line of config.pbtxt. One place, so the two cannot drift apart (issue 19).
Each text is the server's, verbatim, followed by the fix. Beside them, what the server fills
in of a configuration by the backend it names (:func:`server_filled`), which decides the file
a model runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Tuple

#: The platforms tritonserver knows; a Python model names none (``backend: "python"``).
KNOWN_PLATFORMS = (
    "",
    "tensorrt_plan",
    "tensorflow_graphdef",
    "tensorflow_savedmodel",
    "onnxruntime_onnx",
    "pytorch_libtorch",
    "ensemble",
)


@dataclass(frozen=True)
class Refusal:
    """Why the server refuses the model: its words (``message``), then ours (``fix``)."""

    check: str  # a short stable id: platform, dynamic-batching, parameter
    spelled: str  # how config.pbtxt spells the field it is about (to point at its line)
    message: str
    fix: str

    @property
    def text(self) -> str:
        return f"{self.message} ({self.fix})"


def other_backend(config: Mapping[str, Any]) -> str:
    """The backend (else the platform) a model names when it is not a Python model; "" for
    a Python model: ``backend: "python"``, or none named (``platform: "python"`` alone
    included, which the server refuses: load_refusals says so)."""
    named = str(config.get("backend") or config.get("platform") or "")
    return "" if named in ("", "python") else named


#: The platforms a library backend's model may name (tritonserver refuses any other at its
#: repository poll); "" first where the server fills that backend's platform in itself.
BACKEND_PLATFORMS: Dict[str, Tuple[str, ...]] = {
    "tensorrt": ("", "tensorrt_plan"),
    "onnxruntime": ("", "onnxruntime_onnx"),
    "pytorch": ("", "pytorch_libtorch"),
    "tensorflow": ("tensorflow_graphdef", "tensorflow_savedmodel"),
}

#: The model file tritonserver names in ``default_model_filename`` when the config leaves it
#: empty: by the platform for TensorFlow's, else by the backend (none for another backend).
_PLATFORM_FILES = {
    "tensorflow_graphdef": "model.graphdef",
    "tensorflow_savedmodel": "model.savedmodel",
}
_BACKEND_FILES = {
    "python": "model.py",
    "tensorrt": "model.plan",
    "onnxruntime": "model.onnx",
    "pytorch": "model.pt",
    "openvino": "model.xml",
}


#: Instances a KIND_CPU group that gives no count gets where it is not 1 (tritonserver's
#: default for these backends' models, a runtime's among them).
_CPU_COUNTS = {"onnxruntime": 2, "tensorflow": 2}


def default_cpu_count(config: Mapping[str, Any]) -> int:
    """The ``count`` the server gives a KIND_CPU instance group of ``config`` that has none."""
    return _CPU_COUNTS.get(str(config.get("backend") or ""), 1)


def server_filled(config: Mapping[str, Any]) -> Dict[str, str]:
    """The fields tritonserver 2.51 fills in for a model that names its ``backend``
    (observed with both Python backends; tests/testing/test_server_filled_config.py):
    ``default_model_filename`` when empty (a ``platform`` of TensorFlow's decides it even
    for a Python model, whose load then looks for ``model.savedmodel``; NVIDIA's PyTorch
    Python runtime's models, ``backend: "pytorch"`` with ``runtime: "model.py"``, get
    none), a library backend's own ``platform`` when empty, and ``runtime: "model.py"`` for
    a model a python-based backend (``backends/<name>/model.py``) serves."""
    backend = str(config.get("backend") or "")
    platform = str(config.get("platform") or "")
    runtime = str(config.get("runtime") or "")
    filled: Dict[str, str] = {}
    if not config.get("default_model_filename"):
        name = _PLATFORM_FILES.get(platform, _BACKEND_FILES.get(backend, ""))
        filled["default_model_filename"] = (
            "" if backend == "pytorch" and runtime == "model.py" else name
        )
    allowed = BACKEND_PLATFORMS.get(backend, ())
    if not platform and allowed and allowed[0] == "":
        filled["platform"] = allowed[1]
    if backend not in ("", "python") and not runtime:
        filled["runtime"] = "model.py"
    return filled


#: Backends NVIDIA ships as libraries (``libtriton_<name>.so``): a model naming one is no
#: python-based backend's, whatever directory holds a ``model.py``.
LIBRARY_BACKENDS = (
    "onnxruntime",
    "tensorrt",
    "pytorch",
    "tensorflow",
    "openvino",
    "fil",
    "dali",
    "ensemble",
    "identity",
)


def runtime_backend(config: Mapping[str, Any]) -> str:
    """The backend a model's config names when it may be a python-based backend's (a
    ``backends/<name>/model.py``; docs/python_based_backends.md): named by ``backend``,
    neither python nor a library NVIDIA ships; "" otherwise."""
    named = str(config.get("backend") or "")
    return "" if named in ("", "python") or named in LIBRARY_BACKENDS else named


def parameters(config: Mapping[str, Any]) -> Dict[str, str]:
    """The ``parameters`` map as key -> string_value (a bare string is taken as it is)."""
    return {
        str(k): str(v.get("string_value", "") if isinstance(v, Mapping) else v or "")
        for k, v in (config.get("parameters") or {}).items()
    }


def load_refusals(config: Mapping[str, Any], model_name: str) -> List[Refusal]:
    """Every reason the server refuses ``config``, in the order it meets them: the
    repository poll's checks, then the Python backend's parameters."""
    found: List[Refusal] = []
    platform = str(config.get("platform") or "")
    if platform not in KNOWN_PLATFORMS and not config.get("backend"):  # else: backend rules
        found.append(
            Refusal(
                "platform",
                "platform",
                f"unexpected platform type '{platform}' for {model_name}",
                'a Python model names no platform: write backend: "python" instead',
            )
        )
    backend = str(config.get("backend") or "")
    if platform == "ensemble" and backend:
        found.append(
            Refusal(
                "platform",
                "backend",
                f"Ensemble model '{model_name}' must have platform type 'ensemble' and empty "
                "backend type",
                "an ensemble names no backend; a Python model names no platform: write "
                'backend: "python" alone',
            )
        )
    elif platform not in BACKEND_PLATFORMS.get(backend, (platform,)):
        allowed = " or ".join(f'"{p}"' for p in BACKEND_PLATFORMS[backend] if p)
        found.append(
            Refusal(
                "platform",
                "platform",
                f"unexpected 'platform' and 'backend' pair, got:{platform}, {backend}",
                f"a model of backend '{backend}' names platform {allowed}"
                + (" or none" if BACKEND_PLATFORMS[backend][0] == "" else ""),
            )
        )
    tensors = list(config.get("input") or []) + list(config.get("output") or [])
    if platform != "tensorrt_plan" and any(t.get("is_shape_tensor") for t in tensors):
        found.append(
            Refusal(
                "shape-tensor",
                "is_shape_tensor",
                f"shape tensors are only supported for TensorRT platform for {model_name}",
                "drop is_shape_tensor: a Python model's tensors are ordinary tensors",
            )
        )
    batching = config.get("dynamic_batching") or {}
    if batching.get("preserve_ordering") and int(batching.get("priority_levels") or 0) > 1:
        found.append(
            Refusal(
                "dynamic-batching",
                "preserve_ordering",
                "Only one priority level is allowed when 'preserve_ordering' is true for "
                f"{model_name}",
                "drop priority_levels, or preserve_ordering",
            )
        )
    value = parameters(config).get("FORCE_CPU_ONLY_INPUT_TENSORS")
    if value is not None and value not in ("yes", "no"):
        found.append(
            Refusal(
                "parameter",
                '"FORCE_CPU_ONLY_INPUT_TENSORS"',
                # The backend's text (csrc/backend/model_state.cc), its stray quote included
                # as in the original's.
                f"Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: {value}'",
                "use yes or no",
            )
        )
    return found
