"""Where a GPU identity's backend time goes (issue 31 part 1), in one GPU call:

    python -m benchmarks.gpu_identity --breakdown [--requests 50] [--mib 64]
        [--switches 1,1:legacy] [--markdown PATH] [--server-log PATH] [--cpu-only]

For each setting in --switches, POOL[:STREAM[:SPIN]] (PYBACKEND_GPU_LEND_POOL, the lending pool
of csrc/cuda/device_holds.h; PYBACKEND_DLPACK_STREAM, the stream Tensor.from_dlpack hands a
CUDA producer, pybackend/utils/cuda_driver.py; the backend's `ipc-spin-us`, how long both ends
of the lane poll before sleeping, docs/protocol.md "The spin", its default `auto` when left
out; default "1" and "1:legacy": the pool on, the proxy stream against the legacy default
stream; "1::1000" polls 1 ms, longer than the stub's turn of a 64 MiB row) it starts two
servers with only the rows' models: one plain, for the backend
time of zero_copy (--mib MiB), zero_copy_4k and cpu_tiny (benchmarks/gpu_identity.py), and one
with the stage timers on (PYBACKEND_GPU_TRACE=<file>: csrc/cuda/trace.h and
pybackend/utils/gpu_trace.py), whose lines over the measured requests give each stage's
events and time per request, on both sides. The two copies are also measured alone in this
process (benchmarks/gpu_copy_floor.py), so the tables compare the backend time with its floor
in the same run. Without a GPU it says so and measures nothing, except with --cpu-only: the
CPU rows alone, plain and traced, on any machine (the stub's turn in the server against
benchmarks.hotpath's in-process number; what the lane and the wake-ups add; a BLS call's
hand-offs and its callee's time in Triton's queue).
"""

from __future__ import annotations

import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Optional

from benchmarks import gpu_copy_floor, gpu_identity

#: The rows measured per switch value, on the plain server and on the traced one. cpu_tiny has
#: no GPU stage, but its round trip less the stub's turn is the protocol of issue 31 part 2's
#: single round trip; cpu_bls is that part's BLS c1 row (a call to cpu_tiny per request);
#: --cpu-only measures these two alone.
ROWS = ("zero_copy", "zero_copy_4k", "cpu_tiny", "cpu_bls")
CPU_ROWS = ("cpu_tiny", "cpu_bls")

#: Stages in the order a request meets them: (side, stage, what it is).
STAGES = (
    ("backend", "exec.encode", "EXECUTE encoded (the input lent or shared included)"),
    ("backend", "input.share", "input shared as it is (cuMemGetAddressRange + cuIpcGetMemHandle)"),
    ("backend", "input.share_refused", "input not shareable (a client's CUDA shared memory)"),
    ("backend", "input.share_refused_known", "the same, known refused (lending pool)"),
    ("backend", "lend.pool_hit", "lent memory reused from the pool (event)"),
    ("backend", "lend.alloc", "cuMemAlloc of lent memory"),
    ("backend", "lend.handle", "cuMemGetAddressRange + cuIpcGetMemHandle of lent memory"),
    ("backend", "copy.d2d.enqueue", "cuMemcpyDtoDAsync queued (input and output copies)"),
    ("backend", "copy.d2d.sync", "cuStreamSynchronize after each device-to-device copy"),
    ("backend", "copy.d2h.enqueue", "cuMemcpyDtoHAsync queued"),
    ("backend", "copy.d2h.sync", "cuStreamSynchronize after a device-to-host copy"),
    ("backend", "copy.h2d.enqueue", "cuMemcpyHtoDAsync queued"),
    ("backend", "copy.h2d.sync", "cuStreamSynchronize after a host-to-device copy"),
    ("backend", "exec.round_trip", "EXECUTE sent .. RESULT read (the stub's whole turn)"),
    ("stub", "execute.total", "the stub: EXECUTE body in .. RESULT body out"),
    ("stub", "map.open_lent", "cuIpcOpenMemHandle of lent memory (per request)"),
    ("stub", "map.open", "cuIpcOpenMemHandle, cached mapping (miss)"),
    ("stub", "map.hit", "cached mapping reused (event)"),
    ("stub", "execute.model", "the model's execute()"),
    ("stub", "bls.call", "a BLS call on sync: BLS_EXEC sent .. its answer decoded"),
    ("backend", "bls.start", "BLS_EXEC decoded, the Triton request built, ServerInferAsync"),
    ("backend", "bls.callee", "ServerInferAsync .. the callee's final response (queue and turn)"),
    ("backend", "bls.answer", "the callee's response encoded and sent to the calling stub"),
    ("stub", "to_dlpack", "our __dlpack__ of a GPU tensor (the consumer's import not timed)"),
    ("stub", "from_dlpack.export", "producer's __dlpack__(stream=...) in Tensor.from_dlpack"),
    ("stub", "from_dlpack.sync", "cuStreamSynchronize of the stream handed over"),
    ("stub", "from_dlpack.take", "the capsule consumed into our tensor"),
    ("stub", "output.share", "output exported (cuMemGetAddressRange + cuIpcGetMemHandle)"),
    ("stub", "output.share_backend", "output is the backend's memory (cuMemGetAddressRange)"),
    ("stub", "map.close_lent", "cuIpcCloseMemHandle of lent memory (when the tensor dies)"),
    ("backend", "exec.respond", "responses: output buffers, copies, TRITONBACKEND_ResponseSend"),
    ("backend", "ipc_cache.open", "cuIpcOpenMemHandle of a stub output (miss)"),
    ("backend", "ipc_cache.hit", "stub output mapping reused (event)"),
    ("backend", "lend.free", "cuMemFree of lent memory returned by the stub"),
    ("backend", "lane.sleep", "an instance thread asleep for its stub's message (a wake-up)"),
    ("backend", "lane.rearm", "woken to poll for RESULT as a BLS answer went out (event)"),
    ("stub", "lane.sleep", "a stub asleep for the backend's message (a wake-up)"),
)


def _switch_parts(switch: str) -> tuple[str, str, str]:
    """POOL[:STREAM[:SPIN]] as (pool, stream, spin); "" where left out."""
    pool, _, rest = switch.partition(":")
    stream, _, spin = rest.partition(":")
    return pool, stream, spin


def switch_env(switch: str) -> dict[str, str]:
    """The servers' environment for one --switches setting."""
    pool, stream, _ = _switch_parts(switch)
    env = {"PYBACKEND_GPU_LEND_POOL": pool}
    if stream:
        env["PYBACKEND_DLPACK_STREAM"] = stream
    return env


def switch_backend_config(switch: str) -> list[tuple[str, str]]:
    """The servers' --backend-config=python,... for one setting: the spin, when it names one
    (the backend reads its own setting; the stubs get theirs from it)."""
    spin = _switch_parts(switch)[2]
    return [("ipc-spin-us", spin)] if spin else []


def switch_label(switch: str) -> str:
    """A setting as the tables show it: "1, proxy" (the proxy stream is the default), with
    ", spin 1000 µs" where the setting names the spin."""
    pool, stream, spin = _switch_parts(switch)
    return f"{pool}, {stream or 'proxy'}" + (f", spin {spin} µs" if spin else "")


def parse_trace(text: str) -> dict[tuple[str, str], list[int]]:
    """{(side, stage): [ns, ...]} of "pbtrace <side> <stage> <ns>" lines (others skipped)."""
    stages: dict[tuple[str, str], list[int]] = defaultdict(list)
    for line in text.splitlines():
        parts = line.split(" ")
        if len(parts) == 4 and parts[0] == "pbtrace" and parts[3].isdigit():
            stages[(parts[1], parts[2])].append(int(parts[3]))
    return dict(stages)


def stage_rows(stages: dict[tuple[str, str], list[int]], requests: int) -> list[dict]:
    """Per stage: events and µs per request, median µs per event; known stages in request
    order, then any other."""
    known = [(side, stage) for side, stage, _ in STAGES]
    order = [k for k in known if k in stages] + sorted(k for k in stages if k not in known)
    what = {(side, stage): text for side, stage, text in STAGES}
    rows = []
    for key in order:
        ns = sorted(stages[key])
        rows.append({
            "side": key[0],
            "stage": key[1],
            "what": what.get(key, ""),
            "events_per_request": len(ns) / requests,
            "us_per_request": sum(ns) / requests / 1000,
            "median_us": ns[len(ns) // 2] / 1000,
        })  # fmt: skip
    return rows


def stage_table(
    title: str, rows: list[dict], stages: dict, requests: int, callees: Optional[dict] = None
) -> str:
    lines = [
        title,
        "",
        "| side | stage | events/request | µs/request | median µs/event | what |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['side']} | {r['stage']} | {r['events_per_request']:.2f} | "
            f"{r['us_per_request']:.1f} | {r['median_us']:.1f} | {r['what']} |"
        )
    trip = sum(stages.get(("backend", "exec.round_trip"), [])) / requests / 1000
    stub = sum(stages.get(("stub", "execute.total"), [])) / requests / 1000
    if trip and stub:
        lines.append(
            f"| both | protocol | 1.00 | {trip - stub:.1f} | | exec.round_trip - the stub's "
            "execute.total: messages, wake-ups, decoding outside execute |"
        )
    lines += _bls_lines(stages, requests, callees or {})
    return "\n".join(lines)


def _bls_lines(stages: dict, requests: int, callees: dict) -> list[str]:
    """A BLS row's derived lines: what the call adds beyond its callee's path, and how long
    the callee's request waited in Triton's queue (its statistics, plain server; the rest of
    bls.callee is the callee's turn up to its response, whose own backend time also covers
    bls.answer, run inside its TRITONBACKEND_ResponseSend)."""

    def per_request(side: str, stage: str) -> float:
        return sum(stages.get((side, stage), [])) / requests / 1000

    call, callee = per_request("stub", "bls.call"), per_request("backend", "bls.callee")
    if not (call and callee):
        return []
    lines = [
        f"| both | bls hand-offs | 1.00 | {call - callee:.1f} | | bls.call - bls.callee: the "
        "caller's stub to its backend and back, the request's start and its answer |"
    ]
    for name, c in callees.items():
        lines.append(
            f"| triton | {name} queued | 1.00 | {c['queue_us']:.1f} | | in bls.callee: the "
            "callee's request in Triton's queue until its instance took it (statistics) |"
        )
    return lines


def summary_table(results: dict, floors: dict, mib: int, rows: tuple = ROWS) -> str:
    """One line per switch value and row: backend time with the timers off and on, and the
    issue's two yardsticks (the two copies alone; the CPU tiny row)."""
    big = mib << 20
    lines = [
        "| pool, DLPack stream | row | backend µs | traced backend µs | client median µs "
        "| copies d2d, d2h, h2d | two copies alone µs (cuMemcpyDtoD) | goal |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | --- |",
    ]
    for switch, by_kind in results.items():
        plain, traced = by_kind.get("plain", {}), by_kind.get("traced", {})
        tiny = plain.get("cpu_tiny", {}).get("backend_us")
        label = switch_label(switch)
        for row in rows:
            r = plain.get(row, {})
            if "error" in r or not r:
                lines.append(f"| {label} | {row} | failed: {r.get('error', 'not run')} | | | | | |")
                continue
            t = traced.get(row, {}).get("backend_us")
            size = big if row == "zero_copy" else gpu_identity.ROWS[row][1]
            floor = floors.get(size, {}).get("two_dtod") if row not in CPU_ROWS else None
            c = r["copies_per_request"]
            goal = ""
            if row == "zero_copy" and floor:
                ratio = r["backend_us"] / floor
                goal = f"{ratio:.2f}x the copies (goal <= 1.5x and <= 250 µs)"
            elif row == "zero_copy_4k" and tiny:
                goal = f"{r['backend_us'] / tiny:.2f}x cpu_tiny (goal <= 1.2x)"
            for name, callee in r.get("callees", {}).items():
                goal += f"callee {name}: backend {callee['backend_us']:.0f} µs, queued "
                goal += f"{callee['queue_us']:.0f} µs"
            lines.append(
                f"| {label} | {row} | {r['backend_us']:.0f} | "
                f"{'' if t is None else f'{t:.0f}'} | {r['client_median_us']:.0f} | "
                f"{c['d2d']:g}, {c['d2h']:g}, {c['h2d']:g} | "
                f"{'' if floor is None else f'{floor:.0f}'} | {goal} |"
            )
    return "\n".join(lines)


def floor_table(floors: dict) -> str:
    if "error" in floors:
        return f"Copies alone: {floors['error']}"
    lines = [
        "Copies alone (benchmarks/gpu_copy_floor.py, device 0, median µs):",
        "",
        "| bytes | two cuMemcpyDtoD, synced | two async, each synced | two async, one sync "
        "| idle sync |",
        "| ---: | ---: | ---: | ---: | ---: |",
    ]
    for size, f in floors.items():
        lines.append(
            f"| {size} | {f['two_dtod']:.1f} | {f['two_async_synced']:.1f} | "
            f"{f['two_async_one_sync']:.1f} | {f['idle_sync']:.1f} |"
        )
    return "\n".join(lines)


def _run_server(args: Any, switch: str, trace: Optional[Path], rows: tuple) -> dict:
    """_measure_server(), or every row failed with the reason (a server that cannot start
    must not cost the other servers' rows in a one-shot GPU call)."""
    try:
        return _measure_server(args, switch, trace, rows)
    except Exception as e:  # noqa: BLE001 - reported in the table
        why = " ".join(f"{type(e).__name__}: {e}".split())[:300]
        return {row: {"error": why} for row in rows}


def _measure_server(args: Any, switch: str, trace: Optional[Path], rows: tuple) -> dict:
    """The rows on a fresh server (the switch and the timers in its environment); a traced
    row gets its "stages" from the trace lines of its measured requests."""
    import tritonclient.grpc as grpcclient

    from pybackend.server import TritonServer

    env = switch_env(switch)
    if trace is not None:
        env["PYBACKEND_GPU_TRACE"] = str(trace)
        trace.write_text("")
    models = sorted({gpu_identity.ROWS[row][0] for row in rows})

    def mark() -> int:
        time.sleep(0.2)  # lines a response's last stages write after the client has it
        return trace.stat().st_size if trace is not None else 0

    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpu-breakdown-") as tmp:
        repo = gpu_identity.write_repository(Path(tmp), models)
        server = TritonServer(
            repo,
            backend="ours",
            ready_timeout=180.0,
            env=env,
            backend_config=switch_backend_config(switch),
        )
        try:
            with server:
                client = grpcclient.InferenceServerClient(server.grpc_url)
                try:
                    for row in rows:
                        x = gpu_identity.row_input(row, args.mib)
                        kw = {"window": mark} if trace is not None else {}
                        results[row] = gpu_identity.measure_row(server, client, row, x, args, **kw)
                finally:
                    client.close()
        finally:
            if args.server_log:
                with args.server_log.open("a", encoding="utf-8") as log:
                    log.write(f"===== gpu breakdown {env} {switch_backend_config(switch)} ")
                    log.write(f"trace={trace is not None} ")
                    log.write(f"{server!r}\n{server.log_text()}\n")
    if trace is not None:
        data = trace.read_bytes()
        for r in results.values():
            if "window" in r:
                a, b = r.pop("window")
                r["stages"] = parse_trace(data[a:b].decode("utf-8", "replace"))
    return results


def report(results: dict, floors: dict, args: Any) -> str:
    cpu_only = getattr(args, "cpu_only", False)
    what = "cpu_tiny KIND_CPU FP32 [16] over gRPC, cpu_bls one BLS call to it per request"
    if not cpu_only:
        what = f"zero_copy {args.mib} MiB and 4 KiB FP32 through CUDA shared memory, {what}"
    parts = [
        f"GPU identity breakdown (issue 31): {what}, {args.requests} requests per row after 5 "
        "of warm-up; backend µs is Triton's compute_input + compute_infer + compute_output per "
        "request",
        "",
        summary_table(results, floors, args.mib, CPU_ROWS if cpu_only else ROWS),
    ]
    if not cpu_only:
        parts += ["", floor_table(floors)]
    for switch, by_kind in results.items():
        for row, r in by_kind.get("traced", {}).items():
            if "stages" not in r:
                continue
            title = f"Stages, pool, DLPack stream = {switch_label(switch)}, {row} (timers on):"
            rows = stage_rows(r["stages"], r["requests"])
            callees = by_kind.get("plain", {}).get(row, {}).get("callees")
            parts += ["", stage_table(title, rows, r["stages"], r["requests"], callees)]
    return "\n".join(parts)


def main(args: Any) -> int:
    # --cpu-only: the CPU rows alone, which need no GPU (their stages on any machine).
    cpu_only = getattr(args, "cpu_only", False)
    missing = None if cpu_only else gpu_identity.gpu_missing()
    if missing:
        text = f"gpu_identity --breakdown: no GPU: {missing}; nothing measured"
        print(text)
        if args.markdown:
            args.markdown.write_text(text + "\n")
        return 0
    floors: dict = {}
    try:
        if not cpu_only:
            floors = gpu_copy_floor.measure([args.mib << 20, 4096])
    except Exception as e:  # noqa: BLE001 - a driver error there must not cost the servers' rows
        floors = {"error": " ".join(f"{type(e).__name__}: {e}".split())[:300]}
    rows = CPU_ROWS if cpu_only else ROWS
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="gpu-trace-") as tmp:
        for switch in args.switches.split(","):
            trace = Path(tmp) / f"trace-{switch.replace(':', '-')}.txt"
            results[switch] = {
                "plain": _run_server(args, switch, None, rows),
                "traced": _run_server(args, switch, trace, rows),
            }
    text = report(results, floors, args)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 0
