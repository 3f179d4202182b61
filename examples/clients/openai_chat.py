#!/usr/bin/env python3
"""Chat with the `text_generation` example model through the OpenAI-compatible endpoint,
with OpenAI's own Python SDK (`pip install openai`), streaming the reply as it comes:

    pybackend serve examples/model_repository --openai-port 9000    # in another shell
    python examples/clients/openai_chat.py --url http://127.0.0.1:9000/v1 "the quick fox"
"""

from __future__ import annotations

import argparse
import sys
from typing import Iterator

from openai import OpenAI


def chat(url: str, text: str, max_tokens: int | None = None) -> Iterator[str]:
    """The reply's pieces as the model streams them."""
    # The endpoint checks a key only when started with --api-key-env; the SDK needs one.
    with OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
        stream = client.chat.completions.create(
            model="text_generation",
            messages=[{"role": "user", "content": text}],
            max_tokens=max_tokens,
            stream=True,
        )
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                yield chunk.choices[0].delta.content


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:9000/v1", help="the endpoint's URL")
    parser.add_argument("--max-tokens", type=int, default=None)
    parser.add_argument("text")
    args = parser.parse_args()
    for piece in chat(args.url, args.text, args.max_tokens):
        print(piece, end="", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
