"""An OpenAI-compatible endpoint (``/v1/completions``, ``/v1/chat/completions``,
``/v1/embeddings``, ``/v1/models``) in front of a tritonserver, for the text models it serves
with any backend: Python models that follow the vLLM backend's tensor convention
(``text_input`` -> ``text_output``, see :mod:`.convention`), streamed from decoupled models,
and embedding models (:mod:`.embedding`). ``pybackend openai``
runs it beside a server; ``pybackend serve --openai-port`` beside the one it starts.
docs/openai.md."""

from .chat import ChatTemplate
from .server import OpenAIServer

__all__ = ["ChatTemplate", "OpenAIServer"]
