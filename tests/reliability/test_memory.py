"""Shared memory under pressure (UV-01…UV-04): a bound on it is a clear error with byte
counts and the setting to change (never SIGBUS), and arenas shrink back after a burst."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from reliability_support import big_infer, memfd_mappings, start, stubs, wait_for
from tritonclient.utils import InferenceServerException

MiB = 1 << 20
CAP = 16 * MiB


@pytest.fixture(scope="module")
def capped() -> Iterator[Any]:
    with start(["big_identity"], backend_config=[("shm-max-byte-size", str(CAP))]) as s:
        yield s


def test_input_beyond_the_bound_is_a_clear_error(capped: Any, http: Any) -> None:
    client = http(capped)
    (pid,) = stubs(capped, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(32 * MiB, np.uint8))
    message = str(info.value)
    assert (
        "no shared memory for input 'IN' (33554432 bytes) of model instance 'big_identity_0_0'"
        in message
    )
    assert f"does not fit under the shared-memory limit of {CAP} bytes" in message
    # The original's text (NVIDIA's qa test_growth_error looks for it).
    assert "Failed to increase the shared memory pool size to " in message
    assert "bytes already reserved in" in message and "in use" in message
    assert "raise the backend config shm-max-byte-size" in message
    # The instance is healthy: the same stub answers the next request.
    out, answered = big_infer(client, np.arange(8 * MiB, dtype=np.uint32).view(np.uint8)[: 8 * MiB])
    assert answered == pid and out.nbytes == 8 * MiB


def test_output_beyond_the_bound_is_a_clear_error(capped: Any, http: Any) -> None:
    client = http(capped)
    (pid,) = stubs(capped, "big_identity").values()
    with pytest.raises(InferenceServerException) as info:
        big_infer(client, np.ones(16, np.uint8), grow=32 * MiB)
    message = str(info.value)
    assert "Failed to process the request(s) for model 'big_identity_0_0'" in message
    assert (
        f"a block of {32 * MiB} bytes does not fit under the shared-memory limit of {CAP}"
        in message
    )
    assert "raise the backend config shm-max-byte-size" in message
    assert "Failed to increase the shared memory pool size to " in message
    out, answered = big_infer(client, np.ones(16, np.uint8), grow=4 * MiB)
    assert answered == pid and out.nbytes == 4 * MiB


def test_bad_bound_is_refused_at_start() -> None:
    from pybackend.server.tritonserver import ServerError

    with pytest.raises(ServerError) as info:
        with start(
            ["big_identity"], backend_config=[("shm-max-byte-size", "4096")], ready_timeout=30
        ):
            pass
    assert "shm-max-byte-size (4096) must be 0 (no limit) or at least shm-default-byte-size" in str(
        info.value
    )


def _memfd_total(pids: list[int]) -> int:
    return sum(sum(memfd_mappings(p).values()) for p in pids)


def test_arenas_shrink_back_after_a_burst(http: Any) -> None:
    """UV-04: within 10% of the baseline within 60 s of going idle (ours: about a second)."""
    with start(["big_identity"]) as server:
        client = http(server)
        (pid,) = stubs(server, "big_identity").values()
        pids = [server.pid, pid]
        # The very first request is the burst: a first segment made large must go too.
        peak = 0
        for _ in range(3):
            data = np.full(64 * MiB, 7, np.uint8)
            out, _ = big_infer(client, data)
            assert out.nbytes == data.nbytes and out[-1] == 7
            peak = max(peak, _memfd_total(pids))
        assert peak >= 2 * 64 * MiB  # input and output segments, mapped on both sides
        t0 = time.monotonic()
        total = (
            wait_for(
                "the arenas to shrink", lambda: (t := _memfd_total(pids)) <= 4 * MiB and t + 1, 60
            )
            - 1
        )
        shrunk_in = time.monotonic() - t0
        # Small requests after the burst work from the floor segments alone.
        big_infer(client, np.ones(64 * 1024, np.uint8))
        baseline = _memfd_total(pids)
        assert total <= baseline * 1.1, (total, baseline)
        print(f"memfd bytes mapped (server + stub): peak {peak}, {total} after {shrunk_in:.1f} s")
        client.close()


def test_a_small_pinned_block_does_not_keep_a_big_segment(http: Any) -> None:
    """The stub keeps a RESULT's references to our memory alive until its next message. A
    small one is not released at once (that would cost a wake-up per request), but once the
    instance is idle the backend tells the stub, so the segment holding it can go."""
    import tritonclient.http as httpclient

    with start(["view_identity"]) as server:
        client = http(server)

        def send(n: int) -> None:
            inp = httpclient.InferInput("IN", [n], "UINT8")
            inp.set_data_from_numpy(np.full(n, 3, np.uint8), binary_data=True)
            out = client.infer("view_identity", [inp]).as_numpy("OUT")
            assert out.nbytes == n and out[-1] == 3

        def backend_arena() -> int:
            return sum(
                size
                for name, size in memfd_mappings(server.pid).items()
                if "shm_region_view_identity_0_0" in name
            )

        send(8 * MiB)  # the first segment is made 8 MiB large, so it is no floor
        send(64 * 1024)  # lands in it, and the response pins it
        assert backend_arena() >= 8 * MiB
        wait_for("the 8 MiB segment to go", lambda: backend_arena() < 8 * MiB, timeout=10)
        client.close()


def test_first_segments_have_the_default_byte_size(http: Any) -> None:
    """NVIDIA's qa test.sh checks that each shared memory region of the original starts at
    shm-default-byte-size (its /dev/shm files). Ours has no such files (memfd): the
    backend's first segment of each instance has that size, reserved at load; the stub's
    first one has shm-growth-byte-size (test_shm_reservation.py: the instance's total)."""
    size = 4 * MiB
    with start(["big_identity"], backend_config=[("shm-default-byte-size", str(size))]) as server:
        client = http(server)
        (pid,) = stubs(server, "big_identity").values()

        def segments(who: int, backend: bool) -> set[int]:
            return {
                v
                for k, v in memfd_mappings(who).items()
                if "-lane-" not in k and ("big_identity_0_0" in k) == backend
            }

        assert segments(server.pid, True) == {size}  # at load
        big_infer(client, np.ones(MiB, np.uint8))  # input in it, output in the stub's
        for who in (server.pid, pid):
            assert segments(who, True) == {size}, memfd_mappings(who)
            assert segments(who, False) == {MiB}, memfd_mappings(who)
