"""Which Triton models can answer OpenAI's text endpoints, and how a request becomes their
input tensors: the convention of NVIDIA's vLLM backend, which Triton's generate endpoint and
most LLM ``model.py`` files written for the Python backend follow.

Inputs, each sent only where the model declares it:

* ``text_input`` (TYPE_STRING): the prompt (for chat: the conversation rendered by a
  template);
* ``messages`` (TYPE_STRING): for chat, the conversation itself as JSON (a model that renders
  its own prompt declares this one);
* ``stream``, ``exclude_input_in_output`` (TYPE_BOOL): whether the client streams; True (an
  OpenAI completion does not repeat the prompt);
* ``sampling_parameters`` (TYPE_STRING): the request's sampling fields as JSON, under the
  names vLLM's ``SamplingParams`` shares with OpenAI (``max_tokens``, ``temperature`` ...);
* the same sampling fields but ``stop`` as tensors of their own (``max_tokens``,
  ``temperature`` ...), with the type the model declares, as some LLM ensembles take them;
* ``return_finish_reason``, ``return_num_input_tokens``, ``return_num_output_tokens``
  (TYPE_BOOL): True, so that the answer can carry its finish reason and usage.

Outputs: ``text_output`` (each response's new text), and where declared ``finish_reason``,
``num_input_tokens``, ``num_output_tokens``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import numpy as np

#: OpenAI's sampling fields that vLLM's SamplingParams takes under the same name.
SAMPLING_FIELDS = (
    "max_tokens",
    "temperature",
    "top_p",
    "stop",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)
#: Inputs that ask for optional outputs; always True where declared.
RETURN_FLAGS = ("return_finish_reason", "return_num_input_tokens", "return_num_output_tokens")
TEXT_INPUT, MESSAGES, TEXT_OUTPUT = "text_input", "messages", "text_output"
#: ``stop`` is a list: it goes only in ``sampling_parameters``.
KNOWN_INPUTS = frozenset(
    (TEXT_INPUT, MESSAGES, "stream", "exclude_input_in_output", "sampling_parameters")
    + tuple(f for f in SAMPLING_FIELDS if f != "stop")
    + RETURN_FLAGS
)
#: Triton's config data types, as numpy types (BYTES as object).
_NUMPY = {
    "TYPE_BOOL": np.bool_,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}


#: The sampling fields sent as fractions (a model declaring one as an integer would get it
#: truncated) and as whole numbers.
FRACTIONS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
WHOLE_NUMBERS = ("max_tokens", "seed")
_FLOATS = ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64")


class NotATextModel(ValueError):
    """The model's inputs or outputs do not follow the convention; the text says which."""


class BadValue(ValueError):
    """A request this model cannot take (a value out of its input's range, an input it needs
    and the request does not give); ``param``: the request's field."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Input:
    name: str
    data_type: str  # TYPE_*
    dims: Tuple[int, ...]
    optional: bool


@dataclass
class Piece:
    """What one response of the model says."""

    text: str
    finish_reason: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None


class TextModel:
    """A model's configuration (as tritonserver reports it), read for this convention."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self.name = str(config.get("name", ""))
        self.batched = int(config.get("max_batch_size") or 0) > 0
        self.decoupled = bool((config.get("model_transaction_policy") or {}).get("decoupled"))
        self.inputs = {
            i["name"]: Input(
                i["name"],
                i.get("data_type", "TYPE_STRING"),
                tuple(int(d) for d in i.get("dims", [])),
                bool(i.get("optional")),
            )
            for i in config.get("input", [])
        }
        self.outputs = {o["name"] for o in config.get("output", [])}
        problems = self._problems()
        if problems:
            raise NotATextModel(f"model '{self.name}' " + "; ".join(problems))

    def _problems(self) -> List[str]:
        found = []
        if TEXT_INPUT not in self.inputs and MESSAGES not in self.inputs:
            found.append(f"has no input '{TEXT_INPUT}' (TYPE_STRING, the prompt)")
        if TEXT_OUTPUT not in self.outputs:
            found.append(f"has no output '{TEXT_OUTPUT}' (TYPE_STRING, the generated text)")
        unknown = [n for n, i in self.inputs.items() if n not in KNOWN_INPUTS and not i.optional]
        if unknown:
            found.append(
                "takes required inputs this endpoint cannot fill: "
                + ", ".join(repr(n) for n in sorted(unknown))
            )
        for name in sorted(KNOWN_INPUTS & self.inputs.keys()):
            problem = _unfit(self.inputs[name])
            if problem:
                found.append(f"input '{name}' {problem}")
        return found

    @property
    def chats_itself(self) -> bool:
        """The model takes the conversation as JSON and renders its own prompt."""
        return MESSAGES in self.inputs

    @property
    def takes_prompt(self) -> bool:
        return TEXT_INPUT in self.inputs

    @property
    def needs_prompt(self) -> bool:
        return TEXT_INPUT in self.inputs and not self.inputs[TEXT_INPUT].optional

    def tensors(
        self,
        prompt: Optional[str],
        messages: Optional[Sequence[Any]],
        sampling: Mapping[str, Any],
        stream: bool,
    ) -> Dict[str, np.ndarray]:
        """The input tensors for one request (``prompt`` None: chat through ``messages``)."""
        values: Dict[str, Any] = {}
        if prompt is not None:
            values[TEXT_INPUT] = prompt.encode()
        if messages is not None and MESSAGES in self.inputs:
            values[MESSAGES] = json.dumps(list(messages)).encode()
        values["stream"] = stream
        values["exclude_input_in_output"] = True
        values["sampling_parameters"] = json.dumps(dict(sampling)).encode()
        values.update({k: v for k, v in sampling.items() if k in KNOWN_INPUTS})
        values.update({flag: True for flag in RETURN_FLAGS})
        for name, spec in self.inputs.items():
            if not spec.optional and name not in values:
                raise BadValue(_missing(self.name, name), param=name)
        return {
            name: self._array(self.inputs[name], value)
            for name, value in values.items()
            if name in self.inputs
        }

    def _array(self, spec: Input, value: Any) -> np.ndarray:
        # One element, in the shape the model declares (a variable dimension as 1), under a
        # batch dimension of 1 when the model batches.
        shape = ([1] if self.batched else []) + [1 for _ in spec.dims]
        dtype = _NUMPY[spec.data_type]  # _unfit refused the others
        if np.issubdtype(dtype, np.integer) and not isinstance(value, bool):
            bounds = np.iinfo(dtype)
            if not bounds.min <= value <= bounds.max:
                raise BadValue(
                    f"{spec.name} {value} is out of the range of model '{self.name}''s "
                    f"input ({spec.data_type}: {bounds.min} to {bounds.max})",
                    param=spec.name,
                )
        return np.full(shape or [1], value, dtype=dtype)

    def piece(self, outputs: Mapping[str, np.ndarray]) -> Piece:
        """One response's text (UTF-8; several elements joined), finish reason and counts."""
        text = "".join(_text(v) for v in np.asarray(outputs.get(TEXT_OUTPUT, [])).ravel())
        reason = outputs.get("finish_reason")
        said = _text(np.asarray(reason).ravel()[0]) if reason is not None and reason.size else ""
        return Piece(
            text,
            finish_reason=said if said and said != "None" else None,
            input_tokens=_count(outputs.get("num_input_tokens")),
            output_tokens=_count(outputs.get("num_output_tokens")),
        )


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _count(array: Optional[np.ndarray]) -> Optional[int]:
    return None if array is None or array.size == 0 else int(np.asarray(array).sum())


def _unfit(spec: Input) -> str:
    """Why the endpoint cannot fill this input of the convention ('' when it can)."""
    if spec.name in (TEXT_INPUT, MESSAGES, "sampling_parameters"):
        fits, wanted = spec.data_type == "TYPE_STRING", "TYPE_STRING"
    elif spec.name in FRACTIONS:
        fits, wanted = spec.data_type in _FLOATS, "a floating-point type (TYPE_FP32)"
    elif spec.name in WHOLE_NUMBERS:
        fits, wanted = "INT" in spec.data_type, "an integer type (TYPE_INT32)"
    else:  # the flags
        fits, wanted = spec.data_type in _NUMPY and spec.data_type != "TYPE_STRING", "TYPE_BOOL"
    if not fits:
        return f"is {spec.data_type}, not {wanted}"
    if any(d not in (1, -1) for d in spec.dims):
        return f"has dims {list(spec.dims)}: the endpoint sends one element"
    return ""


def _missing(model: str, name: str) -> str:
    if name == MESSAGES:
        how = "use /v1/chat/completions"
    elif name == TEXT_INPUT:
        how = "it takes a prompt"
    else:
        how = f"give '{name}' in the request"
    return f"model '{model}' needs its input '{name}', which this request does not give: {how}"
