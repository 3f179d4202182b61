"""OpenAI's request bodies (``/v1/completions``, ``/v1/chat/completions``), read and checked:
what the endpoint serves, and a refusal in OpenAI's error shape for what it does not."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .convention import SAMPLING_FIELDS


class ApiError(Exception):
    """An error answer: HTTP status, OpenAI's error type, the message and the field;
    ``final``: the same request would fail again, so the answer tells OpenAI's SDKs not to
    retry it (``x-should-retry: false``, which they honour over their own rule: every 5xx)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: Optional[str] = None,
        kind: str = "",
        code: Optional[str] = None,
        final: bool = False,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.kind = kind or _KINDS.get(status, "server_error")
        self.code = code
        self.final = final

    def headers(self) -> Dict[str, str]:
        return {"x-should-retry": "false"} if self.final else {}

    def body(self) -> Dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


#: OpenAI's error types by status (its 401 for a wrong key is an invalid request too).
_KINDS = {400: "invalid_request_error", 401: "invalid_request_error", 404: "invalid_request_error"}


@dataclass
class Ask:
    """One OpenAI request: which model, the prompt or conversation, sampling, streaming."""

    chat: bool
    model: str
    prompt: Optional[str] = None
    messages: List[Dict[str, Any]] = field(default_factory=list)
    sampling: Dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False


@dataclass
class EmbedAsk:
    """One embeddings request: the model, its texts, the length asked, the encoding."""

    model: str
    texts: List[str]
    dimensions: Optional[int] = None
    base64: bool = False


#: The most texts one embeddings request may carry (OpenAI's own limit).
MAX_TEXTS = 2048


def parse(body: bytes, chat: bool) -> Ask:
    data = _json_object(body)
    ask = Ask(chat=chat, model=_model(data), stream=_flag(data, "stream"))
    options = data.get("stream_options") or {}
    ask.include_usage = bool(isinstance(options, dict) and options.get("include_usage"))
    if chat:
        ask.messages = _messages(data.get("messages"))
    else:
        ask.prompt = _prompt(data.get("prompt"))
    ask.sampling = _sampling(data, chat)
    _refuse_unsupported(data)
    return ask


def parse_embeddings(body: bytes) -> EmbedAsk:
    data = _json_object(body)
    ask = EmbedAsk(model=_model(data), texts=_texts(data.get("input")))
    dimensions = data.get("dimensions")
    if dimensions is not None:
        if not isinstance(dimensions, int) or isinstance(dimensions, bool) or dimensions < 1:
            raise ApiError(
                400,
                f"'dimensions' must be a whole number above 0, got {dimensions!r}",
                param="dimensions",
            )
        ask.dimensions = dimensions
    encoding = data.get("encoding_format")
    encoding = "float" if encoding is None else encoding
    if encoding not in ("float", "base64"):
        raise ApiError(
            400,
            f"'encoding_format' must be 'float' or 'base64', got {encoding!r}",
            param="encoding_format",
        )
    ask.base64 = encoding == "base64"
    return ask


def _texts(value: Any) -> List[str]:
    texts = [value] if isinstance(value, str) else value
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ApiError(
            400,
            "'input' must be a string or a list of strings; token ids are not served: "
            "send the text",
            param="input",
        )
    if not texts or len(texts) > MAX_TEXTS:
        raise ApiError(400, f"'input' must hold 1 to {MAX_TEXTS} texts", param="input")
    if any(not t for t in texts):
        raise ApiError(400, "'input' cannot hold an empty string", param="input")
    return texts


def _json_object(body: bytes) -> Dict[str, Any]:
    try:
        data = json.loads(body or b"null")
    except ValueError as e:
        raise ApiError(400, f"the request body is not JSON: {e}") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


def _model(data: Dict[str, Any]) -> str:
    model = data.get("model")
    if not isinstance(model, str) or not model:
        raise ApiError(
            400, "'model' is required: the name of a model the server serves", param="model"
        )
    return model


def _flag(data: Dict[str, Any], name: str) -> bool:
    value = data.get(name, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise ApiError(400, f"'{name}' must be true or false, got {value!r}", param=name)
    return value


def _prompt(value: Any) -> str:
    if isinstance(value, list) and len(value) == 1 and isinstance(value[0], str):
        return value[0]
    if isinstance(value, str):
        return value
    raise ApiError(
        400,
        "'prompt' must be a string (or a list of one string); lists of several prompts and "
        "token ids are not served: send one request per prompt",
        param="prompt",
    )


def _messages(value: Any) -> List[Dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise ApiError(400, "'messages' must be a non-empty list of messages", param="messages")
    messages = []
    for i, message in enumerate(value):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ApiError(
                400, f"messages[{i}] must be an object with a 'role'", param=f"messages[{i}]"
            )
        content = message.get("content")
        if isinstance(content, list):  # OpenAI's content parts: text ones joined
            message = {**message, "content": _text_parts(content, i)}
        messages.append(message)
    return messages


def _text_parts(parts: List[Any], i: int) -> str:
    texts = []
    for part in parts:
        if not (isinstance(part, dict) and part.get("type") == "text"):
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            raise ApiError(
                400,
                f"messages[{i}].content has a part of type {kind!r}: only text is served",
                param=f"messages[{i}].content",
            )
        if not isinstance(part.get("text"), str):
            raise ApiError(400, "a text part needs a string 'text'", param=f"messages[{i}].content")
        texts.append(part["text"])
    return "".join(texts)


def _sampling(data: Dict[str, Any], chat: bool) -> Dict[str, Any]:
    sampling = {k: data[k] for k in SAMPLING_FIELDS if data.get(k) is not None}
    if chat and data.get("max_completion_tokens") is not None:
        sampling["max_tokens"] = data["max_completion_tokens"]  # chat's newer name
    for name in ("max_tokens", "seed"):
        value = sampling.get(name)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise ApiError(400, f"'{name}' must be an integer, got {value!r}", param=name)
    if sampling.get("max_tokens", 1) < 1:
        raise ApiError(400, "'max_tokens' must be at least 1", param="max_tokens")
    for name in ("temperature", "top_p", "presence_penalty", "frequency_penalty"):
        value = sampling.get(name)
        if value is not None and (not isinstance(value, (int, float)) or isinstance(value, bool)):
            raise ApiError(400, f"'{name}' must be a number, got {value!r}", param=name)
    stop = sampling.get("stop")
    if isinstance(stop, str):
        sampling["stop"] = [stop]
    elif stop is not None and not (
        isinstance(stop, list) and all(isinstance(s, str) for s in stop)
    ):
        raise ApiError(400, "'stop' must be a string or a list of strings", param="stop")
    return sampling


def _refuse_unsupported(data: Dict[str, Any]) -> None:
    """What would change the answer's meaning and cannot be honoured is refused, not
    dropped: several choices, echo, log probabilities, tools, response formats."""
    if data.get("n") not in (None, 1):
        raise ApiError(400, "only n=1 is served: send n requests for n choices", param="n")
    if data.get("best_of", 1) not in (1, None):
        raise ApiError(400, "best_of is not served", param="best_of")
    if data.get("echo"):
        raise ApiError(400, "echo is not served: the prompt is not repeated", param="echo")
    for name in ("logprobs", "top_logprobs", "logit_bias", "suffix", "tools", "functions"):
        if data.get(name) not in (None, False, {}, []):
            raise ApiError(400, f"'{name}' is not served by this endpoint", param=name)
    response_format = data.get("response_format")
    if response_format not in (None, {"type": "text"}):
        raise ApiError(
            400, "only response_format {'type': 'text'} is served", param="response_format"
        )
