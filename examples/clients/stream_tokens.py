#!/usr/bin/env python3
"""Stream tokens from the `token_stream` example model over gRPC and print them as they
arrive.

    python examples/clients/stream_tokens.py --url 127.0.0.1:8001 "the quick brown fox"
"""

from __future__ import annotations

import argparse
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient


def stream_tokens(url: str, prompt: str, max_tokens: int | None = None, timeout: float = 30.0):
    """Yield the reply's tokens in order; returns after the final response."""
    events: queue.Queue = queue.Queue()
    client = grpcclient.InferenceServerClient(url)
    finished = False
    try:
        client.start_stream(callback=lambda result, error: events.put((result, error)))
        inputs = [grpcclient.InferInput("PROMPT", [1], "BYTES")]
        inputs[0].set_data_from_numpy(np.array([prompt.encode()], dtype=np.object_))
        if max_tokens is not None:
            inputs.append(grpcclient.InferInput("MAX_TOKENS", [1], "INT32"))
            inputs[1].set_data_from_numpy(np.array([max_tokens], dtype=np.int32))
        # The empty final response tells us the stream is over.
        client.async_stream_infer("token_stream", inputs, enable_empty_final_response=True)
        while True:
            result, error = events.get(timeout=timeout)
            if error is not None:
                raise error
            response = result.get_response()
            token = result.as_numpy("TOKEN")
            if token is not None:
                yield token[0].decode()
            if response.parameters["triton_final_response"].bool_param:
                finished = True
                return
    finally:
        # Left early (the caller stopped iterating, or an error): cancel the request, which
        # the model sees through is_cancelled() and stops generating.
        client.stop_stream(cancel_requests=not finished)
        client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prompt")
    parser.add_argument("--url", default="127.0.0.1:8001", help="gRPC address of tritonserver")
    parser.add_argument("--max-tokens", type=int, default=None)
    args = parser.parse_args(argv)
    for token in stream_tokens(args.url, args.prompt, args.max_tokens):
        print(token, end=" ", flush=True)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
