"""Round trips and error handling of every body layout in pybackend.ipc.codec."""

from __future__ import annotations

import struct

import pytest

from pybackend.ipc import codec
from pybackend.ipc.codec import ProtocolError, RequestDesc, ResponseDesc, ResultDesc, TensorDesc
from pybackend.ipc.protocol import Location, Owner, ResultKind


def inline(name: str, data: bytes, dims=(-1,), dtype: int = 2) -> TensorDesc:
    return TensorDesc(name, dtype, Location.INLINE, dims, len(data), data=data)


def arena(name: str, seg: int, off: int, n: int, where: int = Location.BACKEND_ARENA) -> TensorDesc:
    return TensorDesc(name, 11, where, (n // 4,), n, seg, off)


def sample_requests() -> list:
    return [
        RequestDesc(
            token=2**64 - 1,
            request_id="req-é",
            correlation_id=2**64 - 1,
            flags=3,
            timeout_us=123456789,
            parameters='{"a": 1, "b": "x", "c": true, "d": 1.5}',
            requested_outputs=["OUT0", "OUT1"],
            inputs=[inline("IN0", b"\x00\x01\x02"), arena("IN1", 3, 4096, 64)],
        ),
        RequestDesc(token=7, correlation_id="seq-1", parameters="{}"),
        RequestDesc(token=8, inputs=[inline("E", b"", dims=(0, 3))]),
    ]


def test_execute_round_trip() -> None:
    reqs = sample_requests()
    assert codec.decode_execute(codec.encode_execute(reqs)) == reqs


def test_execute_freed_trailer() -> None:
    """EXECUTE's freed trailer (stub blocks the backend hands back) decodes into the list
    given for it, leaves the requests as they were, and must match its count."""
    reqs = sample_requests()
    body = codec.encode_execute(reqs, freed=[(1, 8192), (2, 0)])
    freed: list = []
    assert codec.decode_execute(body, freed=freed) == reqs
    assert freed == [(1, 8192), (2, 0)]
    assert codec.decode_execute(body) == reqs  # no list given: checked, then dropped
    assert len(body) == len(codec.encode_execute(reqs)) + 4 + 2 * 12
    with pytest.raises(ProtocolError, match="freed trailer"):
        codec.decode_execute(body[:-1])


def test_execute_inline_data_is_a_view_of_the_body() -> None:
    body = bytearray(codec.encode_execute([RequestDesc(1, inputs=[inline("X", b"abcd")])]))
    (req,) = codec.decode_execute(body)
    view = req.inputs[0].data
    assert isinstance(view, memoryview) and bytes(view) == b"abcd"
    view[0] = ord("z")
    assert b"zbcd" in body


def test_result_round_trip() -> None:
    resp = ResponseDesc(
        [inline("O", b"xyz"), arena("P", 0, 64, 8, Location.STUB_ARENA)], '{"k": 1}'
    )
    err = ResponseDesc(error=(7, "cancelled"), parameters="")
    res = ResultDesc(
        [(ResultKind.RESPONSE, 1, resp), (ResultKind.NONE, 2, None), (ResultKind.RESPONSE, 1, err)],
        async_seq=42,
    )
    assert codec.decode_result(codec.encode_result(res)) == res


def test_result_freed_trailer() -> None:
    """The freed trailer is optional: absent means none, appended after encoding it reads
    back as the blocks, and a trailer that does not match its count is refused."""
    items = [(ResultKind.NONE, 2, None)]
    plain = codec.encode_result(ResultDesc(items, async_seq=3))
    assert codec.decode_result(plain).freed == []
    body = bytearray(plain)
    codec.append_freed(body, [(0, 4096), (7, 1 << 40)])
    assert codec.decode_result(body) == ResultDesc(items, 3, freed=[(0, 4096), (7, 1 << 40)])
    assert codec.encode_result(ResultDesc(items, 3, freed=[(0, 4096), (7, 1 << 40)])) == body
    with pytest.raises(ProtocolError):
        codec.decode_result(bytes(body[:-1]))


def test_result_batch_error_round_trip() -> None:
    res = ResultDesc(error=(1, "Failed to process the request(s) for model 'm_0_0', message: x"))
    assert codec.decode_result(codec.encode_result(res)) == res
    assert codec.decode_result(codec.encode_result_error(*res.error)) == res


def test_small_bodies_round_trip() -> None:
    assert codec.decode_hello(codec.encode_hello(1, 99, "3.11.7", "2.0.0")) == (
        1,
        99,
        "3.11.7",
        "2.0.0",
    )
    assert codec.decode_log(codec.encode_log(2, 17, "/m/model.py", "boom ✓")) == (
        2,
        17,
        "/m/model.py",
        "boom ✓",
    )
    assert codec.decode_json(codec.encode_json({"ok": True, "x": [1]})) == {"ok": True, "x": [1]}
    assert codec.decode_segment_add(codec.encode_segment_add(2, 5, 1 << 40)) == (2, 5, 1 << 40)
    assert codec.decode_segment_drop(codec.encode_segment_drop(1, 5)) == (1, 5)
    blocks = [(0, 0), (1, 64), (2**32 - 1, 2**64 - 1)]
    assert codec.decode_free(codec.encode_free(2, blocks)) == (2, blocks)
    assert codec.decode_indirect(codec.encode_indirect(1, 2, 3)) == (1, 2, 3)
    resp = ResponseDesc([inline("O", b"1")])
    assert codec.decode_send(codec.encode_send(9, 1, resp)) == (9, 1, resp)
    assert codec.decode_send(codec.encode_send(9, 1, None)) == (9, 1, None)
    ok, code, msg, payload = codec.decode_reply(codec.encode_reply(True, payload=b"\x01"))
    assert (ok, code, msg, bytes(payload)) == (True, 0, "", b"\x01")
    ok, code, msg, payload = codec.decode_reply(codec.encode_reply(False, 3, "bad"))
    assert (ok, code, msg, bytes(payload)) == (False, 3, "bad", b"")


def test_layout_is_little_endian_and_exact() -> None:
    body = codec.encode_log(1, 2, "f", "m")
    assert (
        bytes(body)
        == b"\x01"
        + struct.pack("<I", 2)
        + struct.pack("<I", 1)
        + b"f"
        + struct.pack("<I", 1)
        + b"m"
    )
    t = bytearray()
    codec.put_tensor(t, TensorDesc("n", 11, Location.STUB_ARENA, (2, 3), 24, 7, 128))
    expected = (
        struct.pack("<I", 1)
        + b"n"
        + struct.pack("<BBI", 11, 2, 2)
        + struct.pack("<2q", 2, 3)
        + struct.pack("<Q", 24)
        + struct.pack("<IQ", 7, 128)
    )
    assert bytes(t) == expected


@pytest.mark.parametrize("cut", [1, 5, 17, 40])
def test_truncated_bodies_raise_protocol_error(cut: int) -> None:
    body = bytes(codec.encode_execute(sample_requests()))
    with pytest.raises(ProtocolError):
        codec.decode_execute(body[:-cut])


def test_trailing_bytes_and_bad_values_are_rejected() -> None:
    with pytest.raises(ProtocolError, match="trailing"):
        codec.decode_execute(bytes(codec.encode_execute([])) + b"\x00")
    with pytest.raises(ProtocolError, match="location"):
        codec.read_tensor(
            codec.Reader(b"\x01\x00\x00\x00n" + struct.pack("<BBI", 1, 9, 0) + struct.pack("<Q", 0))
        )
    with pytest.raises(ProtocolError, match="FREE"):
        codec.decode_free(struct.pack("<BI", 1, 3) + b"\x00" * 12)
    with pytest.raises(ProtocolError, match="rank"):
        codec.read_tensor(codec.Reader(b"\x01\x00\x00\x00n" + struct.pack("<BBI", 1, 0, 1000)))
    with pytest.raises(ProtocolError):
        codec.decode_result(b"\x09")
    with pytest.raises(ProtocolError, match="inline tensor"):
        codec.put_tensor(bytearray(), TensorDesc("x", 2, Location.INLINE, (4,), 4, data=b"ab"))


def test_huge_string_length_is_bounds_checked() -> None:
    with pytest.raises(ProtocolError, match="truncated"):
        codec.Reader(struct.pack("<I", 2**32 - 1) + b"abc").str()


def test_gpu_ipc_tensors_round_trip_in_the_documented_layout() -> None:
    handle = bytes(range(64))
    ref = codec.GpuRef(Owner.STUB, 3, 0x1122334455, handle, 4096)
    t = codec.TensorDesc("g", 11, Location.GPU_IPC, (2, 3), 24, data=ref)
    out = bytearray()
    codec.put_tensor(out, t)
    # docs/protocol.md: u8 owner, u32 device_id, u64 hold, 64-byte handle, u64 offset
    assert bytes(out).endswith(
        struct.pack("<BIQ", 2, 3, 0x1122334455) + handle + struct.pack("<Q", 4096)
    )
    assert codec.read_tensor(codec.Reader(bytes(out))) == t
    # The hot-path decoder of EXECUTE (GPU inputs) agrees.
    body = codec.encode_execute([codec.RequestDesc(1, inputs=[t])])
    (req,) = codec.decode_execute(body)
    assert req.inputs == [t] and req.inputs[0].data == ref
    with pytest.raises(ProtocolError):
        codec.decode_execute(bytes(body)[:-10])
