"""Which Triton models can answer OpenAI's ``/v1/embeddings``, how one input text becomes
their tensors, and how their answer becomes the vector. Two conventions, told apart by the
model's inputs:

* the vLLM backend's embedding task: input ``embedding_request`` (TYPE_STRING, JSON
  ``{"input": text, "pooling_params": {"dimensions": [n]}}``) beside its ``text_input`` (the
  same text, which that backend's configuration requires); output ``text_output``: the
  vector as a JSON list;
* a plain one, as an embedding model written for the Python backend has it: input
  ``text_input`` (TYPE_STRING), output ``embedding`` (a floating-point tensor: the vector);
  an integer input ``dimensions``, where declared, gets the request's ``dimensions``.

Both: ``return_num_input_tokens`` True where declared; an output ``num_input_tokens`` is the
answer's usage. The vLLM backend gives every model it configures an ``embedding_request``
input, generation models too: which task a vLLM model serves shows only when it answers.
An answer is checked before it reaches the client: one flat, non-empty, finite vector.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .model_io import (
    FLOAT_TYPES,
    TEXT_INPUT,
    TEXT_OUTPUT,
    BadValue,
    TritonModel,
    count_of,
    text_of,
)

EMBEDDING_REQUEST, EMBEDDING, DIMENSIONS = "embedding_request", "embedding", "dimensions"
TOKEN_FLAGS = ("return_num_input_tokens", "return_num_output_tokens")
#: Every input of the conventions -> what it holds (model_io.KINDS).
INPUT_KINDS = {
    TEXT_INPUT: "text",
    EMBEDDING_REQUEST: "text",
    DIMENSIONS: "whole",
    **{flag: "flag" for flag in TOKEN_FLAGS},
}


class NotAnEmbeddingModel(ValueError):
    """The model follows neither convention; the text says what it lacks."""


class BadVector(ValueError):
    """The model answered something other than one usable vector; the text says what."""


class EmbeddingModel(TritonModel):
    """A model's configuration read for the embedding conventions; its tensors for one
    text, and the vector of its answer."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        #: The vLLM backend's convention (else the plain one).
        self.vllm = EMBEDDING_REQUEST in self.inputs
        self._output_dims = {
            o["name"]: [int(d) for d in o.get("dims", [])] for o in config.get("output", [])
        }
        problems = self._problems()
        if problems:
            raise NotAnEmbeddingModel(f"model '{self.name}' " + "; ".join(problems))

    def _problems(self) -> List[str]:
        found = []
        if self.vllm:
            if TEXT_OUTPUT not in self.outputs:
                found.append(f"has no output '{TEXT_OUTPUT}' (the vector as JSON)")
            if DIMENSIONS in self.inputs and not self.inputs[DIMENSIONS].optional:
                found.append(f"requires '{DIMENSIONS}', which the vLLM convention never sends")
        else:
            if TEXT_INPUT not in self.inputs:
                found.append(f"has no input '{TEXT_INPUT}' (TYPE_STRING, the text)")
            given = self.outputs.get(EMBEDDING)
            if given is None:
                found.append(f"has no output '{EMBEDDING}' (TYPE_FP32, the vector)")
            elif given not in FLOAT_TYPES:
                found.append(f"output '{EMBEDDING}' is {given}, not a floating-point type")
            elif sum(d != 1 for d in self._output_dims.get(EMBEDDING, [])) > 1:
                dims = self._output_dims[EMBEDDING]
                found.append(
                    f"output '{EMBEDDING}' has dims {dims}: one vector a text is served, "
                    "not one a token (pool it in the model)"
                )
        unfillable = self.unfillable(INPUT_KINDS.keys())
        if unfillable:
            found.append(unfillable)
        return found + self.unfit(INPUT_KINDS)

    def tensors(self, text: str, dimensions: Optional[int]) -> Dict[str, np.ndarray]:
        """The input tensors for one text."""
        values: Dict[str, Any] = {TEXT_INPUT: text.encode()}
        if self.vllm:
            asked: Dict[str, Any] = {"input": text}
            if dimensions is not None:
                asked["pooling_params"] = {"dimensions": [dimensions]}
            values[EMBEDDING_REQUEST] = json.dumps(asked).encode()
        elif dimensions is not None:
            if DIMENSIONS not in self.inputs:
                raise BadValue(
                    f"model '{self.name}' cannot shorten its embeddings: it has no input "
                    f"'{DIMENSIONS}'; leave 'dimensions' out",
                    param=DIMENSIONS,
                )
            values[DIMENSIONS] = dimensions
        values.update({flag: True for flag in TOKEN_FLAGS})
        return self.arrays(values, lambda name: f"model '{self.name}' needs its input '{name}'")

    def vector(
        self, outputs: Mapping[str, np.ndarray], dimensions: Optional[int] = None
    ) -> Tuple[np.ndarray, Optional[int]]:
        """The embedding (float32) and the text's token count, where the model gives one;
        BadVector for an answer that is not one flat, non-empty, finite vector (of
        ``dimensions`` values, when asked)."""
        tokens = count_of(outputs.get("num_input_tokens"))
        if self.vllm:
            vector = self._from_json(outputs.get(TEXT_OUTPUT))
        elif EMBEDDING not in outputs:
            raise BadVector(f"model '{self.name}' answered without '{EMBEDDING}'")
        else:
            raw = np.asarray(outputs[EMBEDDING])
            if sum(d > 1 for d in raw.shape) > 1:
                raise BadVector(
                    f"model '{self.name}' answered '{EMBEDDING}' of shape {list(raw.shape)}, "
                    "not one vector"
                )
            with np.errstate(over="ignore"):  # beyond float32's range: inf, refused below
                vector = raw.astype(np.float32).ravel()
        if vector.size == 0 or not np.isfinite(vector).all():
            what = "an empty vector" if vector.size == 0 else "a vector with NaN or infinity"
            raise BadVector(f"model '{self.name}' answered {what} (in float32)")
        if dimensions is not None and vector.size != dimensions:
            raise BadVector(
                f"model '{self.name}' answered {vector.size} values for dimensions={dimensions}"
            )
        return vector, tokens

    def _from_json(self, said: Optional[np.ndarray]) -> np.ndarray:
        elements = np.asarray(said if said is not None else []).ravel()
        if elements.size != 1:
            raise BadVector(f"model '{self.name}' answered without '{TEXT_OUTPUT}'")
        try:
            values = json.loads(text_of(elements[0]))
        except ValueError:
            values = None
        if not (
            isinstance(values, list)
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)
        ):
            raise BadVector(
                f"model '{self.name}' answered '{TEXT_OUTPUT}' that is not a JSON list of numbers"
            )
        try:
            with np.errstate(over="ignore"):
                return np.asarray(values, dtype=np.float64).astype(np.float32)
        except OverflowError:  # an integer beyond float64
            raise BadVector(f"model '{self.name}' answered a value out of range") from None
