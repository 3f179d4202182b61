"""A chat conversation as the prompt of a model that takes only ``text_input``: rendered by
a Jinja chat template, as Hugging Face tokenizers and vLLM render theirs (the template gets
``messages``, ``add_generation_prompt=True``, empty ``bos_token``/``eos_token``)."""

from __future__ import annotations

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
        # Sandboxed, as the template is data (often downloaded with a model), not code.
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = _raise
        try:
            self._template = env.from_string(source)
        except TemplateError as e:
            raise PybackendError(f"{origin}: not a valid Jinja template: {e}") from None
        self._errors = (TemplateError, _TemplateRefusal)
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


def load(path: Optional[str]) -> Optional[ChatTemplate]:
    return ChatTemplate.from_file(path) if path else None
