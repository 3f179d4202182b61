"""Blocks handed back (docs/protocol.md, FREE and "freed trailer"): the FREE body, and the
trailer an ExecuteBody or OK ResultBody may end with that returns blocks without a FREE."""

from __future__ import annotations

from typing import List, Sequence, Tuple

from .primitives import BLOCK_REF, FREE_HEAD, U32, Buffer, ProtocolError, Reader

_COUNT_AT = U32.unpack_from  # bound once: read_freed runs on the hot path (decode_execute)


def encode_free(owner: int, blocks: Sequence[Tuple[int, int]]) -> bytearray:
    out = bytearray(FREE_HEAD.pack(owner, len(blocks)))
    pack = BLOCK_REF.pack
    for seg, off in blocks:
        out += pack(seg, off)
    return out


def decode_free(body: Buffer) -> Tuple[int, List[Tuple[int, int]]]:
    r = Reader(body)
    owner, n = r.unpack(FREE_HEAD)
    if n * BLOCK_REF.size != r.end - r.pos:
        raise ProtocolError(f"FREE announces {n} blocks but carries {r.end - r.pos} bytes")
    blocks = [r.unpack(BLOCK_REF) for _ in range(n)]
    return owner, blocks


def append_freed(out: bytearray, blocks: Sequence[Tuple[int, int]]) -> None:
    """Append the freed trailer to an encoded ExecuteBody or OK ResultBody: the receiver
    returns the blocks to its arena as a FREE would, without the FREE's socket message."""
    out += U32.pack(len(blocks))
    pack = BLOCK_REF.pack
    for seg, off in blocks:
        out += pack(seg, off)


def read_freed(mv: memoryview, pos: int, end: int) -> List[Tuple[int, int]]:
    """The freed trailer (u32 count, then count x (u32 seg, u64 offset)) that ends a body."""
    if end - pos < 4:
        raise ProtocolError(f"{end - pos} unexpected trailing bytes in body")
    (n,) = _COUNT_AT(mv, pos)
    pos += 4
    if end - pos != n * BLOCK_REF.size:
        raise ProtocolError(f"freed trailer announces {n} blocks but carries {end - pos} bytes")
    return [BLOCK_REF.unpack_from(mv, pos + i * BLOCK_REF.size) for i in range(n)]
