"""config.pbtxt as the dict Triton hands a model (``json.loads(args["model_config"])``).

Parsed with Triton's own protobuf schema (``model_config_pb2`` from tritonclient), never by
hand: what the real server would refuse fails here too. Triton's JSON writes 64-bit
integers (``dims``, ``max_queue_delay_microseconds``...) as numbers, where protobuf's JSON
would write strings, so those are turned back into ints here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Union

from ..errors import ConfigError
from ..utils.config_rules import default_cpu_count, server_filled

__all__ = [
    "ConfigError",
    "ConfigSyntaxError",
    "complete",
    "load_config",
    "model_file_name",
    "normalize",
    "parse_config",
]


class ConfigSyntaxError(ConfigError):
    """config.pbtxt is not valid protobuf text for Triton's schema: ``file:line:col: why``,
    with the parts as attributes (`pybackend validate` reports them)."""

    def __init__(self, source: str, line: int, column: int, text: str) -> None:
        # protobuf's text starts with "line:col : "; the position goes in front instead.
        self.source, self.line, self.column = source, line, column
        self.reason = text.split(" : ", 1)[1] if " : " in text else text
        super().__init__(f"{source}:{line}:{column}: {self.reason}")


_INT64 = {3, 4, 6, 16, 18}  # FieldDescriptor.TYPE_INT64, UINT64, FIXED64, SFIXED64, SINT64


def _schema() -> Any:
    try:
        from tritonclient.grpc import model_config_pb2
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "reading config.pbtxt needs Triton's protobuf schema from tritonclient: "
            "pip install 'pybackend[testing]' (or pass config= as a dict)"
        ) from e
    return model_config_pb2


def _to_dict(message: Any) -> Dict[str, Any]:
    """Like Triton's JSON: every scalar, enum, list and map field of a message that is there,
    defaults included; sub-messages (and a oneof's members) only when set."""
    out: Dict[str, Any] = {}
    for field in message.DESCRIPTOR.fields:
        oneof = field.containing_oneof
        if oneof is not None and message.WhichOneof(oneof.name) != field.name:
            continue
        singular_message = field.message_type is not None and not _repeated(field)
        if singular_message and not message.HasField(field.name):
            continue
        out[field.name] = _value(field, getattr(message, field.name))
    return out


def _value(field: Any, value: Any) -> Any:
    if field.message_type is not None and field.message_type.GetOptions().map_entry:
        vfield = field.message_type.fields_by_name["value"]
        return {k: _value(vfield, v) for k, v in value.items()}
    if _repeated(field):
        return [_scalar(field, v) for v in value]
    return _scalar(field, value)


def _repeated(field: Any) -> bool:
    # protobuf >= 5.29 has the attribute and deprecates `label`; older ones only `label`.
    flag = getattr(field, "is_repeated", None)
    if flag is not None:
        return bool(flag)
    return bool(field.label == field.LABEL_REPEATED)


def _scalar(field: Any, value: Any) -> Any:
    if field.type == field.TYPE_MESSAGE:
        return _to_dict(value)
    if field.type == field.TYPE_ENUM:
        return field.enum_type.values_by_number[value].name
    if field.type in _INT64:
        return int(value)
    return value


_OPTIMIZATION = {
    "priority": "PRIORITY_DEFAULT",
    "input_pinned_memory": {"enable": True},
    "output_pinned_memory": {"enable": True},
    "gather_kernel_buffer_threshold": 0,
    "eager_batching": False,
}


def normalize(config: Dict[str, Any], model_name: str) -> Dict[str, Any]:
    """What the server fills in before a Python model sees its config (checked against
    tritonserver 2.51): the name, a version policy, the optimization defaults, the model
    file name (and a runtime's fields: utils/config_rules.py), instance groups with names,
    counts and kind (CPU: no GPU here), and the sequence batcher's defaults."""
    out = dict(config)
    out["name"] = out.get("name") or model_name
    # As the server: a model that names no platform is a Python one (model.py); an unknown
    # platform without a backend is refused at load (utils/config_rules.py), so none is set.
    out["backend"] = out.get("backend") or ("" if out.get("platform") else "python")
    if "version_policy" not in out:
        out["version_policy"] = {"latest": {"num_versions": 1}}
    # Each part the config leaves out gets its default, as the server fills them in beside
    # those the config sets (``optimization { priority: PRIORITY_MAX }``).
    out["optimization"] = {**_OPTIMIZATION, **(out.get("optimization") or {})}
    out.update(server_filled(out))  # the model file, a library backend's platform, runtime
    groups = [dict(g) for g in out.get("instance_group") or []]
    cpu_count = default_cpu_count(out)
    defaulted = not groups
    if defaulted:
        groups = [{}]
    for i, g in enumerate(groups):
        g["name"] = g.get("name") or (out["name"] if defaulted else f"{out['name']}_{i}")
        g["kind"] = "KIND_CPU" if g.get("kind", "KIND_AUTO") == "KIND_AUTO" else g["kind"]
        g["count"] = g.get("count") or (cpu_count if g["kind"] == "KIND_CPU" else 1)
        for key in ("gpus", "secondary_devices", "profile"):
            g.setdefault(key, [])
        g.setdefault("passive", False)
        g.setdefault("host_policy", "")
    out["instance_group"] = groups
    if out.get("sequence_batching") is not None:
        out["sequence_batching"] = _sequence_batching(out["sequence_batching"], out)
    return out


def model_file_name(config: Dict[str, Any]) -> str:
    """The file of a version directory the backend runs for a :func:`normalize`d config: the
    ``default_model_filename`` the server gave, else ``model.py`` (as
    csrc/backend/model_state.cc reads it)."""
    return str(config.get("default_model_filename") or "model.py")


def _sequence_batching(batching: Dict[str, Any], config: Dict[str, Any]) -> Dict[str, Any]:
    """The sequence batcher as the server fills it in: an idle time of 1 s where none is set,
    and the oldest strategy preferring ``max_batch_size`` where it names no sizes."""
    out = dict(batching)
    if not out.get("max_sequence_idle_microseconds"):
        out["max_sequence_idle_microseconds"] = 1_000_000
    oldest = out.get("oldest")
    max_batch = int(config.get("max_batch_size") or 0)
    if oldest is not None and max_batch > 0 and not oldest.get("preferred_batch_size"):
        out["oldest"] = dict(oldest, preferred_batch_size=[max_batch])
    return out


def complete(config: Dict[str, Any], model_name: str) -> Dict[str, Any]:
    """The configuration an ``auto_complete_config`` returned, as the server then holds it
    (checked against tritonserver 2.51): read back through the schema (so every field of
    an added input or output gets its default, and a field the schema lacks fails as it
    does in the server), the defaults of :func:`normalize`, and a dynamic batcher without
    preferred batch sizes prefers ``max_batch_size``."""
    # The schema first: without tritonclient its error names the install to make.
    pb2 = _schema()
    from google.protobuf import json_format

    try:
        message = json_format.ParseDict(config, pb2.ModelConfig())
    except json_format.ParseError as e:
        raise ConfigError(f"the configuration auto_complete_config returned: {e}") from None
    out = normalize(_to_dict(message), model_name)
    batching = out.get("dynamic_batching")
    max_batch = int(out.get("max_batch_size") or 0)
    if batching is not None and max_batch > 0 and not batching.get("preferred_batch_size"):
        out["dynamic_batching"] = dict(batching, preferred_batch_size=[max_batch])
    return out


def parse_config(text: str, source: str = "config.pbtxt") -> Dict[str, Any]:
    """The model configuration in ``text`` (protobuf text format) as a dict."""
    # The schema first: without tritonclient its error names the install to make.
    pb2 = _schema()
    from google.protobuf import text_format

    try:
        message = text_format.Parse(text, pb2.ModelConfig())
    except text_format.ParseError as e:
        raise ConfigSyntaxError(source, e.GetLine(), e.GetColumn(), str(e)) from None
    return _to_dict(message)


def load_config(path: Union[str, Path]) -> Dict[str, Any]:
    """``config.pbtxt`` of a model directory (or the file itself) as a dict; the schema's
    defaults when the directory has none (Triton then relies on auto-complete)."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.pbtxt"
        if not p.exists():
            return parse_config("", str(p))
    return parse_config(p.read_text(), str(p))
