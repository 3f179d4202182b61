"""A client that leaves the OpenAI endpoint before its whole answer, and what the test model
tests/integration/openai_models/echo_llm says of its cancellation (shared by the HTTP and
HTTPS cases)."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path
from typing import Callable


def leave_a_slow_whole_answer(connect: Callable[[], socket.socket], pieces: int = 200) -> None:
    """Asks echo_llm for a whole answer that comes after ``pieces`` x 50 ms over the socket
    ``connect()`` gives, then closes it after 0.5 s."""
    body = json.dumps({"model": "echo_llm", "prompt": f"!slow {pieces}"}).encode()
    head = (
        "POST /v1/completions HTTP/1.1\r\nHost: localhost\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    with connect() as conn:
        conn.sendall(head.encode() + body)
        time.sleep(0.5)


def cancelled_after(marker: Path) -> int:
    """How many pieces the model had made when it saw its request cancelled (waits up to
    10 s for its marker file)."""
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "the model never saw the request cancelled"
    return int(marker.read_text().split()[1])
