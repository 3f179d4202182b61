"""OpenAI's answer bodies: a whole completion or chat completion, the chunks of a stream
(server-sent events ending with ``data: [DONE]``), and the model list."""

from __future__ import annotations

import json
import time
import uuid
from base64 import b64encode
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

import numpy as np

from .convention import Piece


@dataclass
class Answer:
    """What one request has been answered so far (the pieces' text, reason and counts)."""

    chat: bool
    model: str
    id: str = field(default="")
    created: int = field(default_factory=lambda: int(time.time()))
    text: List[str] = field(default_factory=list)
    finish_reason: Optional[str] = None
    input_tokens: Optional[int] = None
    output_tokens: Optional[int] = None

    def __post_init__(self) -> None:
        if not self.id:
            self.id = ("chatcmpl-" if self.chat else "cmpl-") + uuid.uuid4().hex

    def add(self, piece: Piece) -> None:
        self.text.append(piece.text)
        self.finish_reason = piece.finish_reason or self.finish_reason
        if piece.input_tokens is not None:
            # The prompt's count: some models give it in every response, some in the first.
            self.input_tokens = max(self.input_tokens or 0, piece.input_tokens)
        if piece.output_tokens is not None:
            self.output_tokens = (self.output_tokens or 0) + piece.output_tokens

    @property
    def usage(self) -> Optional[Dict[str, int]]:
        """Token counts, where the model reports both (no tokenizer here to count them)."""
        if self.input_tokens is None or self.output_tokens is None:
            return None
        return {
            "prompt_tokens": self.input_tokens,
            "completion_tokens": self.output_tokens,
            "total_tokens": self.input_tokens + self.output_tokens,
        }

    def _head(self, chunk: bool) -> Dict[str, Any]:
        kind = "chat.completion" if self.chat else "text_completion"
        return {
            "id": self.id,
            "object": kind + (".chunk" if chunk and self.chat else ""),
            "created": self.created,
            "model": self.model,
        }

    def whole(self) -> Dict[str, Any]:
        """The non-streamed answer."""
        text = "".join(self.text)
        reason = self.finish_reason or "stop"
        choice: Dict[str, Any] = {"index": 0, "finish_reason": reason, "logprobs": None}
        if self.chat:
            choice["message"] = {"role": "assistant", "content": text}
        else:
            choice["text"] = text
        body = {**self._head(False), "choices": [choice]}
        if self.usage is not None:
            body["usage"] = self.usage
        return body

    def chunk(self, text: Optional[str], finish_reason: Optional[str] = None) -> Dict[str, Any]:
        """One streamed chunk: new ``text`` (chat: the role alone when None), or the end."""
        choice: Dict[str, Any] = {"index": 0, "finish_reason": finish_reason, "logprobs": None}
        if self.chat:
            choice["delta"] = {"role": "assistant"} if text is None else {"content": text}
            if finish_reason is not None:
                choice["delta"] = {}
        else:
            choice["text"] = text or ""
        return {**self._head(True), "choices": [choice]}

    def usage_chunk(self) -> Dict[str, Any]:
        """The last chunk when the client asked for usage (``stream_options``)."""
        return {**self._head(True), "choices": [], "usage": self.usage}


def event(body: Any) -> bytes:
    """One server-sent event carrying ``body`` as JSON."""
    return b"data: " + json.dumps(body, separators=(",", ":")).encode() + b"\n\n"


DONE = b"data: [DONE]\n\n"


def embeddings_answer(
    model: str, vectors: List[np.ndarray], tokens: int, base64: bool
) -> Dict[str, Any]:
    """The embeddings list; base64: each vector's float32 bytes (little-endian), which
    OpenAI's SDK asks for by default and decodes itself. ``usage`` is a required field of
    OpenAI's answer: 0 where the model counts no tokens (no tokenizer here)."""
    data = [
        {
            "object": "embedding",
            "index": i,
            "embedding": b64encode(vector.astype("<f4").tobytes()).decode()
            if base64
            else vector.tolist(),
        }
        for i, vector in enumerate(vectors)
    ]
    usage = {"prompt_tokens": tokens, "total_tokens": tokens}
    return {"object": "list", "data": data, "model": model, "usage": usage}


def model_entry(name: str, created: int) -> Dict[str, Any]:
    return {"id": name, "object": "model", "created": created, "owned_by": "pybackend"}
