"""A chat conversation as the prompt of a model that takes only ``text_input``: rendered by
a Jinja chat template, as Hugging Face tokenizers and vLLM render theirs (the template gets
``messages``, ``add_generation_prompt=True``, empty ``bos_token``/``eos_token``)."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any, Dict, List, Optional

from pybackend.errors import PybackendError


class ChatTemplate:
    def __init__(self, source: str, origin: str) -> None:
        try:
            from jinja2.exceptions import TemplateError
            from jinja2.sandbox import ImmutableSandboxedEnvironment
        except ImportError:
            raise PybackendError(
                f"{origin}: a chat template needs jinja2: pip install jinja2"
            ) from None
        # Sandboxed, as the template is data (often downloaded with a model), not code; with
        # what Hugging Face's environment gives templates (loop controls, its tojson that
        # keeps non-ASCII text, strftime_now), so that a model's own template renders here.
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.globals["raise_exception"] = _raise
        env.globals["strftime_now"] = _strftime_now
        env.filters["tojson"] = _tojson
        try:
            self._template = env.from_string(source)
        except TemplateError as e:
            raise PybackendError(f"{origin}: not a valid Jinja template: {e}") from None
        # A template that indexes a message it does not understand (content parts, a
        # missing key) fails with Python's errors: the request's fault, refused as such.
        self._errors = (TemplateError, _TemplateRefusal, TypeError, KeyError, IndexError)
        self.origin = origin

    @classmethod
    def from_file(cls, path: str) -> "ChatTemplate":
        try:
            return cls(Path(path).read_text(encoding="utf-8"), path)
        except OSError as e:
            raise PybackendError(f"--chat-template {path}: {e.strerror or e}") from None

    def render(self, messages: List[Dict[str, Any]]) -> str:
        """The prompt; ValueError with the template's own words when it refuses them."""
        try:
            return str(
                self._template.render(
                    messages=messages, add_generation_prompt=True, bos_token="", eos_token=""
                )
            )
        except self._errors as e:
            raise ValueError(f"the chat template {self.origin} refused the messages: {e}") from None


class _TemplateRefusal(Exception):
    pass


def _raise(message: str) -> None:
    raise _TemplateRefusal(message)


def _strftime_now(format: str) -> str:  # noqa: A002 - the name templates call it with
    return datetime.now().strftime(format)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: Optional[int] = None, **kwargs: Any
) -> str:
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, **kwargs)
