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

from .model_io import TEXT_INPUT, TEXT_OUTPUT, BadValue, Input, TritonModel, count_of, text_of

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
MESSAGES = "messages"
#: Every input of the convention -> what it holds (model_io.KINDS): a fraction in an integer
#: type would be truncated (temperature 0.7 as 0), and so on. ``stop`` is a list: it goes
#: only in ``sampling_parameters``.
INPUT_KINDS = {
    TEXT_INPUT: "text",
    MESSAGES: "text",
    "sampling_parameters": "text",
    "stream": "flag",
    "exclude_input_in_output": "flag",
    **{flag: "flag" for flag in RETURN_FLAGS},
    "max_tokens": "whole",
    "seed": "whole",
    "temperature": "fraction",
    "top_p": "fraction",
    "presence_penalty": "fraction",
    "frequency_penalty": "fraction",
}
KNOWN_INPUTS = frozenset(INPUT_KINDS)


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
        found += self.unfit(INPUT_KINDS)
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
        return self.arrays(values, lambda name: _missing(self.name, name))

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


def _missing(model: str, name: str) -> str:
    if name == MESSAGES:
        how = "use /v1/chat/completions"
    elif name == TEXT_INPUT:
        how = "it takes a prompt"
    else:
        how = f"give '{name}' in the request"
    return f"model '{model}' needs its input '{name}', which this request does not give: {how}"
