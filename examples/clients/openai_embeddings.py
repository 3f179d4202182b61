#!/usr/bin/env python3
"""Embed texts with the `text_embedding` example model through the OpenAI-compatible
endpoint, with OpenAI's own Python SDK (`pip install openai`), and rank them by cosine
similarity to the first, as a retrieval step would:

    pybackend serve examples/model_repository --openai-port 9000    # in another shell
    python examples/clients/openai_embeddings.py --url http://127.0.0.1:9000/v1 \\
        "the cat sat" "a cat sat down" "stock prices fell"
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Tuple

import numpy as np
from openai import OpenAI


def ranked(url: str, query: str, texts: List[str]) -> List[Tuple[float, str]]:
    """``texts`` with their cosine similarity to ``query``, most similar first."""
    # The endpoint checks a key only when started with --api-key-env; the SDK needs one.
    with OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=60) as client:
        answer = client.embeddings.create(model="text_embedding", input=[query, *texts])
    vectors = np.array([item.embedding for item in answer.data])  # in the order given
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=1e-12)
    scores = vectors[1:] @ vectors[0]
    return sorted(zip(scores.tolist(), texts), reverse=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:9000/v1", help="the endpoint's URL")
    parser.add_argument("query")
    parser.add_argument("texts", nargs="+")
    args = parser.parse_args()
    for score, text in ranked(args.url, args.query, args.texts):
        print(f"{score:.3f}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
