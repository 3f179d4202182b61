"""config.pbtxt as `pybackend config` rewrites it: the file's own settings, with what
tritonserver takes over from ``auto_complete_config`` (spec 2.1: ``max_batch_size``, the
inputs and outputs, a scheduler where the file names none, and
``model_transaction_policy.decoupled``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict

from ..testing.completion import completed_config, has_auto_complete
from ..testing.config import ConfigSyntaxError, _schema
from ..testing.harness import ModelHarness

SCHEDULERS = ("dynamic_batching", "sequence_batching", "ensemble_scheduling")


@dataclass
class Rewrite:
    old: str  # the file's text ("" where there is none)
    new: str  # the text with what auto_complete_config declares
    completes: bool  # whether the model has auto_complete_config at all
    changed: bool  # whether the new text says something the old one does not


def rewrite(model_dir: Path) -> Rewrite:
    # The schema first: without tritonclient its error names the install to make.
    pb2 = _schema()
    from google.protobuf import json_format, text_format

    file = model_dir / "config.pbtxt"
    old = file.read_text() if file.is_file() else ""
    message = pb2.ModelConfig()
    try:
        text_format.Parse(old, message)
    except text_format.ParseError as e:
        raise ConfigSyntaxError(str(file), e.GetLine(), e.GetColumn(), str(e)) from None
    original = pb2.ModelConfig()
    original.CopyFrom(message)
    if not has_auto_complete(ModelHarness(model_dir)):
        return Rewrite(old, old, False, False)
    completed = completed_config(ModelHarness(model_dir))
    taken: Dict[str, Any] = {
        "max_batch_size": completed.get("max_batch_size", 0),
        "input": completed.get("input", []),
        "output": completed.get("output", []),
    }
    if message.WhichOneof("scheduling_choice") is None:
        taken.update({k: completed[k] for k in SCHEDULERS if k in completed})
    decoupled = (completed.get("model_transaction_policy") or {}).get("decoupled")
    if decoupled is not None:
        taken["model_transaction_policy"] = {"decoupled": decoupled}
    for key in ("input", "output"):
        message.ClearField(key)
    json_format.ParseDict(taken, message)
    if not message.backend and not message.platform:
        message.backend = "python"
    # Name and backend first, as people write them; then the rest in the schema's order.
    head = pb2.ModelConfig(name=message.name, platform=message.platform, backend=message.backend)
    for key in ("name", "platform", "backend"):
        message.ClearField(key)
    body = text_format.MessageToString(head) + text_format.MessageToString(message)
    new = _comments(old) + body
    return Rewrite(old, new, True, text_format.Parse(new, pb2.ModelConfig()) != original)


def _comments(text: str) -> str:
    """The comment lines the file starts with, kept above the rewritten settings."""
    head = []
    for line in text.splitlines():
        if not line.startswith("#"):
            break
        head.append(line + "\n")
    return "".join(head)
