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
answer's usage.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np

from .model_io import NUMPY_TYPES, BadValue, TritonModel, count_of, text_of

TEXT_INPUT, TEXT_OUTPUT = "text_input", "text_output"
EMBEDDING_REQUEST, EMBEDDING, DIMENSIONS = "embedding_request", "embedding", "dimensions"
TOKEN_FLAGS = ("return_num_input_tokens", "return_num_output_tokens")
KNOWN_INPUTS = frozenset((TEXT_INPUT, EMBEDDING_REQUEST, DIMENSIONS) + TOKEN_FLAGS)
_FLOATS = ("TYPE_FP16", "TYPE_FP32", "TYPE_FP64")


class NotAnEmbeddingModel(ValueError):
    """The model follows neither convention; the text says what it lacks."""


class EmbeddingModel(TritonModel):
    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(config)
        #: The vLLM backend's convention (else the plain one).
        self.vllm = EMBEDDING_REQUEST in self.inputs
        problems = self._problems()
        if problems:
            raise NotAnEmbeddingModel(f"model '{self.name}' " + "; ".join(problems))

    def _problems(self) -> List[str]:
        found = []
        if TEXT_INPUT not in self.inputs and not self.vllm:
            found.append(f"has no input '{TEXT_INPUT}' (TYPE_STRING, the text)")
        if self.vllm and TEXT_OUTPUT not in self.outputs:
            found.append(f"has no output '{TEXT_OUTPUT}' (the vector as JSON)")
        if not self.vllm and self.outputs.get(EMBEDDING) not in _FLOATS:
            given = self.outputs.get(EMBEDDING)
            found.append(
                f"has no output '{EMBEDDING}' (TYPE_FP32, the vector)"
                if given is None
                else f"output '{EMBEDDING}' is {given}, not a floating-point type"
            )
        unfillable = self.unfillable(KNOWN_INPUTS)
        if unfillable:
            found.append(unfillable)
        for name in sorted(KNOWN_INPUTS & self.inputs.keys()):
            spec = self.inputs[name]
            if name in (TEXT_INPUT, EMBEDDING_REQUEST):
                fits, wanted = spec.data_type == "TYPE_STRING", "TYPE_STRING"
            elif name == DIMENSIONS:
                fits, wanted = "INT" in spec.data_type, "an integer type (TYPE_INT32)"
            else:
                fits = spec.data_type in NUMPY_TYPES and spec.data_type != "TYPE_STRING"
                wanted = "TYPE_BOOL"
            if not fits:
                found.append(f"input '{name}' is {spec.data_type}, not {wanted}")
            elif any(d not in (1, -1) for d in spec.dims):
                found.append(f"input '{name}' has dims {list(spec.dims)}: one text a request")
        return found

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
        for name, spec in self.inputs.items():
            if not spec.optional and name not in values:
                raise BadValue(f"model '{self.name}' needs its input '{name}'", param=name)
        return {
            name: self.array(self.inputs[name], value)
            for name, value in values.items()
            if name in self.inputs
        }

    def vector(self, outputs: Mapping[str, np.ndarray]) -> Tuple[np.ndarray, Optional[int]]:
        """The embedding (float32) and the text's token count, where the model gives one."""
        tokens = count_of(outputs.get("num_input_tokens"))
        if self.vllm:
            said = np.asarray(outputs.get(TEXT_OUTPUT, [])).ravel()
            if said.size != 1:
                raise ValueError(f"model '{self.name}' answered without '{TEXT_OUTPUT}'")
            values = json.loads(text_of(said[0]))
            return np.asarray(values, dtype=np.float32).ravel(), tokens
        if EMBEDDING not in outputs:
            raise ValueError(f"model '{self.name}' answered without '{EMBEDDING}'")
        return np.asarray(outputs[EMBEDDING], dtype=np.float32).ravel(), tokens
