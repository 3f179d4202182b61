"""Golden bytes: the C++ message layer (csrc/ipc/messages/*) and the Python codec
(pybackend/ipc/*_codec.py) agree on every message kind the backend and the stub exchange.

A table of messages, as fields: each kind the backend receives is encoded by the Python codec
and decoded by the C++ one; each kind the backend sends is encoded by the C++ one, compared
byte for byte with the Python encoding of the same fields, and decoded by the Python codec.
Fields are compared one by one. The C++ half is csrc/tests/messages_golden.cc, built here
with CMake (tests/ipc/native_build.py, as for the native unit tests) and driven
through stdin/stdout: `decode KIND HEX` -> JSON, `encode KIND JSON` -> hex.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any, Callable, Iterator

import pytest
from messages_golden_fields import Fields, bls_exec_desc
from messages_golden_table import (
    BLS_EXEC,
    FROM_BACKEND,
    NO_BODY,
    TO_BACKEND,
)
from native_build import build_native_target

from pybackend.ipc import bls_codec
from pybackend.ipc.protocol import MessageKind
from pybackend.ipc.result_codec import ResultDesc, encode_result

# ------------------------------------------------------------------------ the C++ side


class Golden:
    def __init__(self, binary: Path) -> None:
        self.proc = subprocess.Popen(
            [str(binary)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )

    def raw(self, line: str) -> str:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        return self.proc.stdout.readline().rstrip("\n")

    def ask(self, line: str) -> str:
        out = self.raw(line)
        assert not out.startswith("error:"), f"{line[:60]}...: {out}"
        return out

    def decode(self, kind: str, body: bytes) -> Fields:
        return json.loads(self.ask(f"decode {kind} {body.hex()}"))

    def encode(self, kind: str, fields: Fields) -> bytes:
        return bytes.fromhex(self.ask(f"encode {kind} {json.dumps(fields)}"))

    def close(self) -> None:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Golden]:
    if shutil.which("cmake") is None:
        pytest.skip("cmake is not installed")
    g = Golden(build_native_target(tmp_path_factory.mktemp("golden"), "messages_golden"))
    yield g
    g.close()


def _normalize(fields: Fields) -> Fields:
    """JSON round trip, so tuples and lists, and ints and floats, compare as the C++ side's."""
    return json.loads(json.dumps(fields))


@pytest.mark.parametrize(
    "kind,fields,encode", TO_BACKEND, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(TO_BACKEND)]
)
def test_python_encodes_cpp_decodes(
    golden: Golden, kind: str, fields: Fields, encode: Callable[[Fields], Any]
) -> None:
    got = golden.decode(kind, bytes(encode(fields)))
    if kind in ("INIT_REPLY", "FINALIZE_REPLY"):
        got = {"json": json.loads(got["json"])}
    want = _normalize(fields)
    for key in want:  # field by field, for a readable failure
        assert got.get(key) == want[key], f"{kind}.{key}"
    assert set(got) == set(want), kind


@pytest.mark.parametrize(
    "kind,fields,python_bytes,decode",
    FROM_BACKEND,
    ids=[f"{k}-{i}" for i, (k, _, _, _) in enumerate(FROM_BACKEND)],
)
def test_cpp_encodes_python_decodes(
    golden: Golden,
    kind: str,
    fields: Fields,
    python_bytes: bytes,
    decode: Callable[[bytes], Fields],
) -> None:
    body = golden.encode(kind, fields)
    assert body == python_bytes, f"{kind}: C++ {body.hex()} != Python {python_bytes.hex()}"
    got = _normalize(decode(body))
    want = _normalize(fields)
    if kind == "REPLY":  # the payload as the stub reads it
        want["payload"] = python_bytes[1:].hex() if want["ok"] else ""
        want.pop("value", None)
    if kind == "BLS_RESPONSE" and want["response"] is not None:
        want["response"].setdefault("parameters", "")
        want["response"].setdefault("outputs", [])
    for key in want:
        assert got.get(key) == want[key], f"{kind}.{key}"


def test_every_kind_with_a_body_is_in_the_table() -> None:
    covered = {k for k, _, _ in TO_BACKEND} | {k for k, _, _, _ in FROM_BACKEND}
    missing = {k.name for k in MessageKind} - covered - NO_BODY
    assert not missing, f"message kinds without a golden entry: {sorted(missing)}"


def test_a_truncated_or_padded_body_is_refused(golden: Golden) -> None:
    """The C++ decoders check bounds (and BLS_EXEC's end): a short body is a DecodeError."""
    body = bytes(bls_codec.encode_bls_exec(bls_exec_desc(BLS_EXEC)))
    assert golden.raw(f"decode BLS_EXEC {body[:-3].hex()}").startswith("error: truncated")
    assert golden.raw(f"decode BLS_EXEC {(body + b'x').hex()}") == (
        "error: trailing bytes in BLS_EXEC"
    )
    result = bytes(encode_result(ResultDesc([(0, 1, None)], 1, freed=[(1, 2)])))
    assert "freed trailer announces 1 blocks" in golden.raw(f"decode RESULT {result[:-1].hex()}")
