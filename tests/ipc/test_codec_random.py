"""Randomised codec round trips (hypothesis, when installed)."""

from __future__ import annotations

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pybackend.ipc import codec  # noqa: E402
from pybackend.ipc.codec import RequestDesc, ResponseDesc, ResultDesc, TensorDesc  # noqa: E402
from pybackend.ipc.protocol import Location, ResultKind  # noqa: E402

u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
text = st.text(max_size=20)
dims = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5)


@st.composite
def tensors(draw: st.DrawFn) -> TensorDesc:
    name = draw(text)
    dtype = draw(st.integers(0, 255))
    if draw(st.booleans()):
        data = draw(st.binary(max_size=64))
        return TensorDesc(name, dtype, Location.INLINE, draw(dims), len(data), data=data)
    where = draw(st.sampled_from([Location.BACKEND_ARENA, Location.STUB_ARENA]))
    return TensorDesc(name, dtype, where, draw(dims), draw(u64), draw(u32), draw(u64))


responses = st.builds(
    ResponseDesc,
    st.lists(tensors(), max_size=4),
    text,
    st.none() | st.tuples(u32, text),
)

requests = st.builds(
    RequestDesc,
    u64,
    text,
    u64 | text,
    u32,
    u64,
    text,
    st.lists(text, max_size=3),
    st.lists(tensors(), max_size=4),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(requests, max_size=4), st.lists(st.tuples(u32, u64), max_size=4))
def test_execute(reqs: list, freed: list) -> None:
    got: list = []
    assert codec.decode_execute(codec.encode_execute(reqs, freed), freed=got) == reqs
    assert got == freed


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.just(ResultKind.RESPONSE), u32, responses)
        | st.tuples(st.just(ResultKind.NONE), u32, st.none()),
        max_size=4,
    ),
    u32,
    st.lists(st.tuples(u32, st.integers(0, 2**64 - 1)), max_size=4),
)
def test_result(items: list, seq: int, freed: list) -> None:
    res = ResultDesc(items, seq, freed=freed)
    assert codec.decode_result(codec.encode_result(res)) == res


@settings(max_examples=100, deadline=None)
@given(u64, u32, st.none() | responses)
def test_send(token: int, flags: int, resp: object) -> None:
    assert codec.decode_send(codec.encode_send(token, flags, resp)) == (token, flags, resp)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=200))
def test_garbage_never_escapes_as_another_error(data: bytes) -> None:
    for decode in (codec.decode_execute, codec.decode_result, codec.decode_send, codec.decode_free):
        try:
            decode(data)
        except codec.ProtocolError:
            pass
        except UnicodeDecodeError:
            pytest.fail("invalid UTF-8 should be carried, not raise")
