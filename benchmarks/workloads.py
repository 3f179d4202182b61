"""The benchmark's workloads: which model, what request, how many connections."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks import payloads
from benchmarks.payloads import Payload

KIB = 1024
MIB = 1024 * KIB


@dataclass(frozen=True)
class Workload:
    key: str  # short id used in JSON and on the command line
    title: str  # row label in the report
    payload: Payload
    concurrency: int
    stub_models: tuple[str, ...]  # models whose stub processes this workload exercises
    window_scale: float = 1.0  # big tensors get longer windows (fewer, slower requests)
    native: bool = True  # False: the native floor has no equivalent (BLS)

    @property
    def model(self) -> str:
        return self.payload.model


def _fp32_elems(nbytes: int) -> int:
    return nbytes // 4


WORKLOADS: tuple[Workload, ...] = (
    Workload(
        "tiny_c1",
        "identity FP32 [1,16] c1",
        payloads.identity("identity", (1, 16)),
        1,
        ("identity",),
    ),
    Workload(
        "tiny_c16",
        "identity FP32 [1,16] c16",
        payloads.identity("identity", (1, 16)),
        16,
        ("identity",),
    ),
    Workload(
        "4k_c1",
        "identity 4 KiB c1",
        payloads.identity("identity", (1, _fp32_elems(4 * KIB))),
        1,
        ("identity",),
    ),
    Workload(
        "64k_c1",
        "identity 64 KiB c1",
        payloads.identity("identity", (1, _fp32_elems(64 * KIB))),
        1,
        ("identity",),
    ),
    Workload(
        "fresh64k_c1",
        "new 64 KiB output c1",
        payloads.identity("fresh", (1, _fp32_elems(64 * KIB))),
        1,
        ("fresh",),
    ),
    Workload(
        "4m_c1",
        "identity 4 MiB c1",
        payloads.identity("identity", (1, _fp32_elems(4 * MIB))),
        1,
        ("identity",),
    ),
    Workload(
        "4m_c16",
        "identity 4 MiB c16",
        payloads.identity("identity", (1, _fp32_elems(4 * MIB))),
        16,
        ("identity",),
        window_scale=2.0,
    ),
    Workload(
        "64m_c1",
        "identity 64 MiB c1",
        payloads.identity("identity", (1, _fp32_elems(64 * MIB))),
        1,
        ("identity",),
        window_scale=3.0,
    ),
    Workload("add_sub", "add_sub FP32 [4] c1", payloads.add_sub("add_sub"), 1, ("add_sub",)),
    Workload(
        "bytes_echo",
        "BYTES echo 32 strings c1",
        payloads.bytes_echo("bytes_echo", 32, 64),
        1,
        ("bytes_echo",),
    ),
    Workload(
        "bytes_decode",
        "BYTES decode 5000 strings c1",
        payloads.bytes_decode("bytes_decode", 5000, 16),
        1,
        ("bytes_decode",),
    ),
    Workload(
        "batch_c32",
        "dynamic batching (max 64) c32",
        payloads.identity("identity_batch", (1, 16)),
        32,
        ("identity_batch",),
    ),
    Workload(
        "bls",
        "BLS 1 call/request c1",
        payloads.identity("bls", (1, 16)),
        1,
        ("bls", "bls_target"),
        native=False,
    ),
    Workload(
        "decoupled",
        "decoupled 100 responses/request c1",
        payloads.stream("decoupled", 100),
        1,
        ("decoupled",),
    ),
    Workload(
        "2inst_c8",
        "2 instances c8",
        payloads.identity("identity_2inst", (1, 16)),
        8,
        ("identity_2inst",),
    ),
)

#: The workload after which the post-burst memory snapshot is taken.
BURST_WORKLOAD = "64m_c1"


def select(keys: list[str] | None) -> tuple[Workload, ...]:
    if not keys:
        return WORKLOADS
    known = {w.key: w for w in WORKLOADS}
    unknown = [k for k in keys if k not in known]
    if unknown:
        raise SystemExit(f"unknown workload(s) {unknown}; choose from {sorted(known)}")
    return tuple(known[k] for k in keys)
