"""benchmarks.hotpath: the stub's EXECUTE -> RESULT path in-process, one checkout or two."""

from __future__ import annotations

import re

from benchmarks import hotpath


def test_every_case_answers_and_is_timed(capsys) -> None:
    """A tiny run over this checkout: each case's RESULT decodes with one item per request
    (the child asserts it) and gets a time."""
    hotpath.main(["--rounds", "1", "--number", "20", "--repeat", "1"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [r.split(" | ")[0][2:] for r in rows[1:]] == [c[0] for c in hotpath.CASES]
    for row in rows[1:]:
        assert float(row.split(" | ")[1].strip(" |")) > 0


def test_two_checkouts_get_a_ratio_column() -> None:
    best = hotpath.run([hotpath.HERE, hotpath.HERE], rounds=1, number=10, repeat=1)
    text = hotpath.table([hotpath.HERE, hotpath.HERE], best)
    assert "second/first" in text.splitlines()[0]
    for line in text.splitlines()[2:]:
        assert re.search(r"\| \d+\.\d\d \|$", line)


def test_idle_us_adds_a_row_per_case_after_sleeping() -> None:
    """--idle-us: each case gets a second row, single calls each made after that long asleep
    (the child times them; the row follows its case)."""
    best = hotpath.run([hotpath.HERE], rounds=1, number=5, repeat=1, idle_us=200)
    names = [c[0] for c in hotpath.CASES]
    assert list(best) == [n for c in names for n in (c, f"{c} after 200 µs idle")]
    assert all(0 < v[0] < float("inf") for v in best.values())
