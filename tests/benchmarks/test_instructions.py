"""benchmarks.instructions: tritonserver under callgrind, the backend's execute counted per
request, through a real server (valgrind is installed by .ci/run where it is missing)."""

from __future__ import annotations

import re

from benchmarks import instructions

ANNOTATED = """\
--------------------------------------------------------------------------------
Ir                  file:function
--------------------------------------------------------------------------------
6,622,490 (100.0%)  ???:TRITONBACKEND_ModelInstanceExecute [/x/libtriton_python.so]
3,877,229 (58.55%)  ???:TRITONBACKEND_ResponseSend [/x/libtritonserver.so]
  890,774 (13.45%)  ./malloc/./malloc/malloc.c:free [/usr/lib/x86_64-linux-gnu/libc.so.6]
"""


def test_inclusive_reads_a_function_s_count() -> None:
    assert instructions.inclusive(ANNOTATED, instructions.EXECUTE) == 6_622_490
    assert instructions.inclusive(ANNOTATED, instructions.RESPONSE_SEND) == 3_877_229
    assert instructions.inclusive(ANNOTATED, "free") == 890_774
    assert instructions.inclusive(ANNOTATED, "TRITONBACKEND_RequestRelease") == 0


def test_ours_is_counted_through_a_real_server(capsys) -> None:
    """Each request is checked (the identity's binary output is the input); the count is per
    request and splits into Triton's ResponseSend and the rest."""
    instructions.main(["--backends", "ours", "--requests", "30"])
    row = re.search(
        r"^\| ours \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|$", capsys.readouterr().out, re.M
    )
    assert row is not None
    total, send, rest = (int(g.replace(",", "")) for g in row.groups())
    # A tiny request's execute is thousands of instructions, not millions (the count is per
    # request) and not zero (collection was on inside execute).
    assert 2_000 < total < 500_000
    assert 0 < send < total
    assert abs(rest - (total - send)) <= 1  # each printed rounded
