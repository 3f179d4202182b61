"""The checks tritonserver (2.51) makes on a Python model's config.pbtxt when it loads the
model, made offline. Each error's text is the server's own refusal, observed by loading
such a model (tests/cli/validate_cases.py holds one broken model per check), without
the trailing " for <model>" (but for check_refusals', which are the offline harness's rules
and texts, utils/config_rules.py); warnings are for what the server loads but is likely wrong."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from ..utils.config_rules import load_refusals
from ..utils.model_versions import no_served_version_text, served_versions
from .findings import ERROR, WARNING, ModelReport, line_of

CONFIG = "config.pbtxt"


def check_refusals(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    """What the server refuses by the rules the offline harness refuses by, all of them."""
    for refusal in load_refusals(config, report.name):
        line = line_of(text, refusal.spelled)
        report.add(ERROR, refusal.check, refusal.text, CONFIG, line)


def check_identity(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    """The name against the directory, and a version to serve."""
    name = config.get("name") or ""
    if name and name != report.path.name:
        report.add(
            ERROR,
            "model-name",
            f"unexpected directory name '{report.path.name}' for model '{name}', directory "
            "name must equal model name",
            CONFIG,
            line_of(text, "name:"),
        )
    if not served_versions(report.path, config):
        report.add(
            ERROR,
            "version",
            f"{no_served_version_text(report.name)} (a version is a numbered directory "
            "holding model.py, e.g. 1/)",
        )


def check_tensors(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    """Names, data types, dims and reshapes of the inputs and outputs."""
    for kind in ("input", "output"):
        seen: List[str] = []
        for tensor in config.get(kind) or []:
            _check_tensor(report, text, kind, tensor)
            name = tensor.get("name") or ""
            if name and name in seen:
                report.add(
                    WARNING,
                    "duplicate-tensor",
                    f"model {kind} '{name}' is declared more than once: tritonserver loads "
                    "the model, but only one declaration can describe the tensor; keep one",
                    CONFIG,
                    line_of(text, f'"{name}"', line_of(text, f'"{name}"') + 1),
                )
            seen.append(name)


def _check_tensor(report: ModelReport, text: str, kind: str, tensor: Dict[str, Any]) -> None:
    name = tensor.get("name") or ""
    if not name:
        report.add(
            ERROR, "tensor-name", f"model {kind} must specify 'name'", CONFIG, line_of(text, kind)
        )
        return
    line = line_of(text, f'"{name}"')
    what = f"model {kind} '{name}'"
    if tensor.get("data_type", "TYPE_INVALID") == "TYPE_INVALID":
        report.add(ERROR, "data-type", f"{what} must specify 'data_type'", CONFIG, line)
    dims = [int(d) for d in tensor.get("dims") or []]
    if not dims:
        report.add(ERROR, "dims", f"{what} must specify 'dims'", CONFIG, line)
    elif any(d < 1 and d != -1 for d in dims):
        report.add(
            ERROR,
            "dims",
            f"{what} dimension must be integer >= 1, or -1 to indicate a variable-size "
            f"dimension (dims: {dims})",
            CONFIG,
            line,
        )
    reshape = tensor.get("reshape")
    if reshape is not None and dims:
        shape = [int(d) for d in reshape.get("shape") or []]
        if -1 not in dims and -1 not in shape and _count(dims) != _count(shape):
            report.add(
                ERROR,
                "reshape",
                f"{what} has different size for dims and reshape (dims {dims}: {_count(dims)} "
                f"elements, reshape {shape}: {_count(shape)})",
                CONFIG,
                line,
            )


def _count(dims: Sequence[int]) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


def check_batching(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    max_batch = int(config.get("max_batch_size") or 0)
    if max_batch < 0:
        report.add(
            ERROR,
            "max-batch-size",
            f"'max_batch_size' must be non-negative value (it is {max_batch})",
            CONFIG,
            line_of(text, "max_batch_size"),
        )
    batching = config.get("dynamic_batching")
    if batching is None:
        return
    line = line_of(text, "preferred_batch_size")
    for size in batching.get("preferred_batch_size") or []:
        if int(size) <= 0:
            report.add(
                ERROR,
                "preferred-batch-size",
                f"dynamic batching preferred size must be positive (it is {size})",
                CONFIG,
                line,
            )
        elif int(size) > max_batch:
            report.add(
                ERROR,
                "preferred-batch-size",
                f"dynamic batching preferred size must be <= max batch size ({size} > "
                f"max_batch_size {max_batch})",
                CONFIG,
                line,
            )


def check_instance_groups(report: ModelReport, text: str, config: Dict[str, Any]) -> None:
    groups = config.get("instance_group") or []
    for i, group in enumerate(groups):
        name = group.get("name") or f"{report.name}_{i}"
        kind = group.get("kind", "KIND_AUTO")
        line = line_of(text, "instance_group")
        if kind == "KIND_CPU" and group.get("gpus"):
            report.add(
                ERROR,
                "instance-group",
                f"instance group {name} of model {report.name} has kind KIND_CPU but "
                "specifies one or more GPUs",
                CONFIG,
                line,
            )
        if kind == "KIND_GPU":
            report.add(
                WARNING,
                "instance-group",
                f"instance group {name} has kind KIND_GPU: where the server has no GPU, "
                f"tritonserver refuses the model (instance group {name} of model "
                f"{report.name} has kind KIND_GPU but no GPUs are available)",
                CONFIG,
                line,
            )


def instance_count(config: Dict[str, Any]) -> int:
    """How many instances tritonserver creates, counted as the backend counts them
    (csrc/backend/thread_budget.cc CountInstances) on the normalized config: count (1 when
    unset) times the number of GPUs listed (1 when none), 1 when there is no group."""
    total = 0
    for group in config.get("instance_group") or []:
        count = int(group.get("count") or 1)
        if count > 0:
            total += count * max(len(group.get("gpus") or []), 1)
    return total or 1
