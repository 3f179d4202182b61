"""Reading the server's Prometheus metrics endpoint: whole text and one family's samples."""

from __future__ import annotations

import re
import urllib.request
from typing import Any

SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][\w:]*)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$")
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(server: Any) -> str:
    with urllib.request.urlopen(server.metrics_url, timeout=10) as reply:
        return reply.read().decode()


def samples(text: str, name: str) -> dict[tuple, float]:
    """{(metric name, sorted label items): value} for the lines of one family."""
    found = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if match and match["name"].startswith(name):
            labels = tuple(sorted(LABEL.findall(match["labels"] or "")))
            found[(match["name"], labels)] = float(match["value"])
    return found


def key(name: str, **labels: str) -> tuple:
    return (name, tuple(sorted(labels.items())))


def family_lines(server: Any, name: str) -> list[str]:
    """Every endpoint line that mentions ``name`` (# HELP / # TYPE and samples)."""
    return [line for line in scrape(server).splitlines() if name in line]
