"""BLS and model-control bodies: encode/decode round trips and truncation errors."""

from __future__ import annotations

import pytest

from pybackend.ipc import bls_codec
from pybackend.ipc.codec import ProtocolError, Reader, ResponseDesc, TensorDesc
from pybackend.ipc.protocol import Location


def test_bls_exec_round_trip() -> None:
    desc = bls_codec.BlsExecDesc(
        "model",
        3,
        True,
        "rid",
        "corr-str",
        2,
        1000,
        1,
        0,
        '{"a": 1}',
        ["OUT0", "OUT1"],
        [
            TensorDesc("IN0", 11, Location.INLINE, (2,), 8, data=b"\x00" * 8),
            TensorDesc("IN1", 11, Location.STUB_ARENA, (4, 4), 64, 1, 128),
        ],
        77,
    )
    assert bls_codec.decode_bls_exec(bls_codec.encode_bls_exec(desc)) == desc


def test_bls_exec_integer_correlation_id() -> None:
    desc = bls_codec.BlsExecDesc("m", correlation_id=2**64 - 1)
    assert bls_codec.decode_bls_exec(bls_codec.encode_bls_exec(desc)).correlation_id == 2**64 - 1


def test_bls_response_round_trip() -> None:
    resp = ResponseDesc(
        [TensorDesc("OUT", 8, Location.BACKEND_ARENA, (3,), 12, 2, 64)], '{"k": "v"}'
    )
    assert bls_codec.decode_bls_response(bls_codec.encode_bls_response(1, resp)) == (1, resp)
    assert bls_codec.decode_bls_response(bls_codec.encode_bls_response(1, None)) == (1, None)
    err = ResponseDesc((), "", (2, "not found"))
    assert bls_codec.decode_bls_response(bls_codec.encode_bls_response(0, err)) == (0, err)


def test_truncated_bodies_raise_protocol_error() -> None:
    body = bls_codec.encode_bls_exec(bls_codec.BlsExecDesc("model", inputs=[]))
    with pytest.raises(ProtocolError):
        bls_codec.decode_bls_exec(body[:-3])
    with pytest.raises(ProtocolError):
        bls_codec.decode_bls_response(bls_codec.encode_bls_response(1, ResponseDesc())[:-1])


def test_every_cut_or_padded_bls_response_is_a_protocol_error() -> None:
    # The stub reads BLS_RESPONSE with flat offsets (no Reader): a body cut anywhere, or one
    # with bytes after it, must still fail as ProtocolError, never struct.error/IndexError.
    bodies = [
        bls_codec.encode_bls_response(
            1,
            ResponseDesc(
                [
                    TensorDesc("OUT0", 11, Location.INLINE, (2, 2), 16, data=bytes(range(16))),
                    TensorDesc("OUT1", 8, Location.BACKEND_ARENA, (3,), 12, 2, 64),
                ],
                '{"k": 1}',
            ),
        ),
        bls_codec.encode_bls_response(1, ResponseDesc((), "", (3, "callee failed"))),
    ]
    for body in bodies:
        for cut in range(len(body)):
            with pytest.raises(ProtocolError):
                bls_codec.decode_bls_response(bytes(body[:cut]))
        with pytest.raises(ProtocolError, match="trailing"):
            bls_codec.decode_bls_response(bytes(body) + b"\x00")


def test_model_control_bodies() -> None:
    r = Reader(bls_codec.encode_model_load("m", '{"x": 1}', {"file:1/model.py": b"abc"}))
    assert (r.str(), r.str(), r.u32(), r.str(), bytes(r.blob())) == (
        "m",
        '{"x": 1}',
        1,
        "file:1/model.py",
        b"abc",
    )
    r.done()
    r = Reader(bls_codec.encode_model_unload("m", True))
    assert (r.str(), r.u8()) == ("m", 1)
    r = Reader(bls_codec.encode_model_ready("m", -1))
    assert r.str() == "m"
