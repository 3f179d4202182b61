"""What a model returns wrong gives its client a clear error and leaves the instance
healthy: outputs that do not match the config, wrong return types, and (playing a
malicious or broken stub through pybackend's internals) forged offsets, sizes, BYTES
payloads and messages, which the backend checks before it reads a byte."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from reliability_support import LogWatch, infer, start, stubs, wait_for
from tritonclient.utils import InferenceServerException


@pytest.fixture(scope="module")
def server() -> Iterator[Any]:
    with start(["misbehave"], backend_config=[("stub-restart-max-backoff-seconds", "1")]) as s:
        yield s


def _pid(server: Any) -> int:
    (pid,) = stubs(server, "misbehave").values()
    return pid


WRONG = {
    # public API misuse: the config declares OUT as FP32 [-1]
    "wrong_dtype": "output 'OUT' of model instance 'misbehave_0_0' has data type TYPE_INT64 "
    "but the model configuration declares TYPE_FP32: convert the array",
    "wrong_rank": "output 'OUT' of model instance 'misbehave_0_0' has shape [64, 64] but the "
    "model configuration declares [-1]",
    "object_array": "has data type TYPE_STRING but the model configuration declares TYPE_FP32",
    "return_dict": "Expected a list in the execute return, found type '<class 'dict'>'.",
    "return_strings": "Expected an 'InferenceResponse' object in the execute function return "
    "list, found type '<class 'str'>'.",
    "return_two": "InferenceRequest(s) size is:1, and InferenceResponse(s) size is:2",
    "return_none_list": "execute returned None for this request and its response sender sent "
    "nothing",
    "raise": "RuntimeError: model code failed on purpose",
    # a forged RESULT
    "forge_stub_offset": "output 'OUT': the stub referenced bytes [1099511627776, "
    "1099511644160) outside its segment",
    "forge_backend_offset": "output 'OUT' names bytes [1099511627776, 1099511644160) of "
    "backend segment 0, which do not exist",
    "forge_size": "output 'OUT' of model instance 'misbehave_0_0' holds 1073741824 bytes but "
    "shape [4096] of FP32 needs 16384",
    "forge_bytes": "BYTES output 'TEXT' of model instance 'misbehave_0_0' is malformed: "
    "element 0 claims 1048576 bytes but only 3 follow",
}


@pytest.mark.parametrize("cmd", list(WRONG))
def test_wrong_output_is_a_clear_error(server: Any, http: Any, cmd: str) -> None:
    client = http(server)
    pid = _pid(server)
    with pytest.raises(InferenceServerException) as info:
        infer(client, "misbehave", cmd)
    assert WRONG[cmd] in str(info.value)
    assert infer(client, "misbehave", "ok") == pid  # same stub, still serving


def test_unknown_segment_is_refused_after_a_bounded_wait(server: Any, http: Any) -> None:
    """A segment id may name a SEGMENT_ADD still in flight on the other channel: the backend
    waits for it (5 s at most), then refuses."""
    client = http(server)
    pid = _pid(server)
    with pytest.raises(InferenceServerException) as info:
        infer(client, "misbehave", "forge_unknown_segment")
    assert "the stub referenced shared-memory segment 4242, which was not announced" in str(
        info.value
    )
    assert infer(client, "misbehave", "ok") == pid


def test_harmless_oddities_pass(server: Any, http: Any) -> None:
    import tritonclient.http as httpclient

    client = http(server)
    pid = _pid(server)
    # A non-contiguous view goes out as its values.
    inp = httpclient.InferInput("CMD", [1], "BYTES")
    inp.set_data_from_numpy(np.array([b"non_contiguous"], dtype=np.object_))
    out = client.infer("misbehave", [inp]).as_numpy("OUT")
    np.testing.assert_array_equal(out, np.arange(4096, dtype=np.float32)[::2])
    # An undeclared output is dropped, as Triton asks for the declared ones only.
    assert infer(client, "misbehave", "wrong_name") == pid
    # Non-bytes objects in a BYTES output are sent as their str(), like the original.
    inp.set_data_from_numpy(np.array([b"bytes_of_ints"], dtype=np.object_))
    text = client.infer("misbehave", [inp]).as_numpy("TEXT")
    assert list(text) == [b"1", b"2.5", b"None"]
    # FREEs of blocks that do not exist are logged and ignored.
    watch = LogWatch(server)
    assert infer(client, "misbehave", "bogus_free") == pid
    watch.wait("the stub freed an unknown block (segment 77, offset 8589934592)")


@pytest.mark.parametrize(
    "cmd, reason",
    [
        ("forge_truncated_result", "malformed RESULT: truncated message"),
        ("junk_datagram", "short datagram (3 bytes) on the async channel"),
    ],
)
def test_broken_messages_replace_the_stub(server: Any, http: Any, cmd: str, reason: str) -> None:
    """A stub that breaks the protocol cannot be trusted with anything more: it is killed
    (every request it held fails, naming why) and a new one takes over."""
    client = http(server)
    pid = _pid(server)
    watch = LogWatch(server)
    try:
        infer(client, "misbehave", cmd)
    except InferenceServerException as e:
        assert reason in str(e)
    watch.wait("instance 'misbehave_0_0': a new stub is serving")
    assert reason in watch.text()
    new = wait_for("a new stub", lambda: stubs(server, "misbehave").get("misbehave_0_0"))
    assert new != pid
    assert infer(client, "misbehave", "ok") == new
