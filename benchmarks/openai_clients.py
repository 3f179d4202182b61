"""What the OpenAI endpoint keeps between requests saves: its gRPC clients
(pybackend/openai_api/client_pool.py) and its models' configurations (config_cache.py).

One tritonserver with the example models text_generation and text_embedding, and two
endpoints in front of it in this process: one keeping what it keeps (the default) and one
that does not: ``--compare clients`` makes and closes a client per use (keep=0, as before
the pool), ``--compare configs`` reads the model's configuration for every request
(config_ttl=0, as before the cache). Requests one at a time, the two endpoints interleaved
round by round: a whole completion of a short prompt and an embedding of one text. Prints
each one's p50 and p90 in milliseconds and the ratio kept/new.

    python -m benchmarks.openai_clients [--compare clients|configs] [--requests 200]
        [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Dict, List, Tuple

from pybackend.openai_api import OpenAIServer
from pybackend.openai_api.client_pool import ClientPool
from pybackend.openai_api.config_cache import CONFIG_TTL
from pybackend.server import TritonServer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "model_repository"
REQUESTS: Dict[str, Tuple[str, Dict[str, object]]] = {
    "completion": (
        "/completions",
        {"model": "text_generation", "prompt": "one two three", "max_tokens": 3},
    ),
    "embedding": ("/embeddings", {"model": "text_embedding", "input": "a short query"}),
}


def post(url: str, body: Dict[str, object]) -> None:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        json.load(answer)  # every answer read whole; a failure raises


def measure(url: str, path: str, body: Dict[str, object], n: int) -> List[float]:
    took = []
    for _ in range(n):
        start = time.perf_counter()
        post(url + path, body)
        took.append((time.perf_counter() - start) * 1e3)
    return took


def main(argv: List[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.openai_clients", description=__doc__)
    p.add_argument("--requests", type=int, default=200, help="per round, kind and endpoint")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--compare", choices=("clients", "configs"), default="clients")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("text_generation", "text_embedding"):
            shutil.copytree(EXAMPLES / name, Path(tmp) / name)
        with TritonServer(tmp) as triton:
            kept = OpenAIServer(triton.grpc_url, timeout=30).start()
            ttl = 0 if args.compare == "configs" else CONFIG_TTL
            new = OpenAIServer(triton.grpc_url, timeout=30, config_ttl=ttl).start()
            if args.compare == "clients":
                new.upstream.clients = ClientPool(new.upstream._new_client, keep=0)
            try:
                times: Dict[str, Dict[str, List[float]]] = {
                    side: {kind: [] for kind in REQUESTS} for side in ("kept", "new")
                }
                for _ in range(args.rounds):
                    for kind, (path, body) in REQUESTS.items():
                        measure(kept.url, path, body, 10)  # warm
                        times["kept"][kind] += measure(kept.url, path, body, args.requests)
                        if args.compare == "clients":
                            # gRPC shares a live connection between channels of one
                            # target: without the kept side's clients, a new one connects
                            # afresh.
                            kept.upstream.clients.close_idle()
                        measure(new.url, path, body, 10)
                        times["new"][kind] += measure(new.url, path, body, args.requests)
            finally:
                kept.close()
                new.close()
    print("| request | kept p50 ms | new p50 ms | kept/new p50 | kept p90 ms | new p90 ms |")
    print("|---|--:|--:|--:|--:|--:|")
    for kind in REQUESTS:
        k, n = times["kept"][kind], times["new"][kind]
        kq, nq = statistics.quantiles(k, n=10), statistics.quantiles(n, n=10)
        k50, n50 = statistics.median(k), statistics.median(n)
        print(f"| {kind} | {k50:.2f} | {n50:.2f} | {k50 / n50:.2f}x | {kq[8]:.2f} | {nq[8]:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
