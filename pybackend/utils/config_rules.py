"""The configurations tritonserver (2.51, either backend) refuses to load, as rules on the
model configuration that return what they find instead of raising: the offline engines
(testing/load_checks.py) raise the first as their load error, `pybackend validate` reports
them all at their line of config.pbtxt. One place, so the two cannot drift apart (issue 19).
Each text is the server's, verbatim, followed by the fix."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Mapping

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
