"""Summarise a conformance JUnit XML report per feature (for docs/compatibility.md).

pytest tests/conformance --junitxml=report.xml
python tests/conformance/conformance_support/summary.py report.xml
"""

from __future__ import annotations

import collections
import sys
import xml.etree.ElementTree as ET


def summarise(path: str) -> tuple[dict[str, collections.Counter], list[str]]:
    counts: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    failures = []
    for case in ET.parse(path).iter("testcase"):
        # classname: tests.conformance.<feature>.<module>
        parts = case.get("classname", "").split(".")
        feature = parts[2] if len(parts) > 2 and parts[1] == "conformance" else parts[0]
        if case.find("failure") is not None or case.find("error") is not None:
            outcome = "failed"
            failures.append(f"{feature}: {parts[-1]}::{case.get('name')}")
        elif case.find("skipped") is not None:
            outcome = "skipped"
        else:
            outcome = "passed"
        counts[feature][outcome] += 1
    return counts, failures


def main(argv: list[str]) -> int:
    counts, failures = summarise(argv[1])
    print("| feature | passed | failed | skipped |")
    print("|---|---:|---:|---:|")
    total: collections.Counter = collections.Counter()
    for feature in sorted(counts):
        c = counts[feature]
        total.update(c)
        print(f"| {feature} | {c['passed']} | {c['failed']} | {c['skipped']} |")
    print(f"| **total** | {total['passed']} | {total['failed']} | {total['skipped']} |")
    if failures:
        print("\nFailures:")
        print("\n".join(f"- {f}" for f in failures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
