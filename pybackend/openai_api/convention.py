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
from typing import Any, Dict, List, Mapping, Optional, Sequence

import numpy as np

from .model_io import NUMPY_TYPES, BadValue, Input, TritonModel, count_of, text_of

__all__ = ["BadValue", "Input", "NotATextModel", "Piece", "TextModel"]

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
#: The sampling fields sent as fractions (a model declaring one as an integer would get it
#: truncated) and as whole numbers.
FRACTIONS = ("temperature", "top_p", "presence_penalty", "frequency_penalty")
WHOLE_NUMBERS = ("max_tokens", "seed")
_FLOATS = ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64")


class NotATextModel(ValueError):
    """The model's inputs or outputs do not follow the convention; the text says which."""


@dataclass
class Piece:
    """What one response of the model says."""

    text: str
    finish_reason: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None


class TextModel(TritonModel):
    """A model's configuration (as tritonserver reports it), read for this convention."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        problems = self._problems()
        if problems:
            raise NotATextModel(f"model '{self.name}' " + "; ".join(problems))

    def _problems(self) -> List[str]:
        found = []
        if TEXT_INPUT not in self.inputs and MESSAGES not in self.inputs:
            found.append(f"has no input '{TEXT_INPUT}' (TYPE_STRING, the prompt)")
        if TEXT_OUTPUT not in self.outputs:
            found.append(f"has no output '{TEXT_OUTPUT}' (TYPE_STRING, the generated text)")
        unfillable = self.unfillable(KNOWN_INPUTS)
        if unfillable:
            found.append(unfillable)
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
            name: self.array(self.inputs[name], value)
            for name, value in values.items()
            if name in self.inputs
        }

    def piece(self, outputs: Mapping[str, np.ndarray]) -> Piece:
        """One response's text (UTF-8; several elements joined), finish reason and counts."""
        text = "".join(text_of(v) for v in np.asarray(outputs.get(TEXT_OUTPUT, [])).ravel())
        reason = outputs.get("finish_reason")
        said = text_of(np.asarray(reason).ravel()[0]) if reason is not None and reason.size else ""
        return Piece(
            text,
            finish_reason=said if said and said != "None" else None,
            input_tokens=count_of(outputs.get("num_input_tokens")),
            output_tokens=count_of(outputs.get("num_output_tokens")),
        )


def _unfit(spec: Input) -> str:
    """Why the endpoint cannot fill this input of the convention ('' when it can)."""
    if spec.name in (TEXT_INPUT, MESSAGES, "sampling_parameters"):
        fits, wanted = spec.data_type == "TYPE_STRING", "TYPE_STRING"
    elif spec.name in FRACTIONS:
        fits, wanted = spec.data_type in _FLOATS, "a floating-point type (TYPE_FP32)"
    elif spec.name in WHOLE_NUMBERS:
        fits, wanted = "INT" in spec.data_type, "an integer type (TYPE_INT32)"
    else:  # the flags
        fits, wanted = (
            spec.data_type in NUMPY_TYPES and spec.data_type != "TYPE_STRING",
            "TYPE_BOOL",
        )
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
