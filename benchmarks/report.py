"""Markdown tables and the issue's targets, computed from the runner's JSON results."""

from __future__ import annotations

from typing import Any, Callable

BACKENDS = ("original", "ours", "native")
MIB = 1024 * 1024

Results = dict[str, Any]


def _num(value: float | None, digits: int = 0) -> str:
    if value is None:
        return "–"
    return f"{value:,.{digits}f}"


def _us(value: float | None) -> str:
    return "–" if value is None else _num(value, 1 if value < 100 else 0)


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:.0f}%"


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _fmt_ratio(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _rate(row: dict[str, Any], key: str) -> float | None:
    """Requests/s, except for streaming rows: responses/s."""
    return row.get("events_per_s") if key == "decoupled" else row.get("throughput")


def _get(results: Results, key: str, backend: str, metric: str) -> float | None:
    row = results["workloads"].get(key, {}).get(backend, {})
    if "na" in row:
        return None
    return _rate(row, key) if metric == "rate" else row.get(metric)


def workload_table(results: Results) -> str:
    lines = [
        "| workload | backend | req/s | p50 µs | p99 µs | backend µs/req "
        "| stub CPU | server CPU | client CPU | stub RSS MiB |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for key, entry in results["workloads"].items():
        for backend in BACKENDS:
            row = entry.get(backend)
            if row is None:
                continue
            if "na" in row:
                lines.append(
                    f"| {entry['title']} | {backend} | n/a ({row['na']}) |  |  |  |  |  |  |  |"
                )
                continue
            rate = _num(_rate(row, key)) + (" resp/s" if key == "decoupled" else "")
            cells = [entry["title"], backend, rate, _us(row["p50_us"]), _us(row["p99_us"])]
            cells += [_us(row["backend_us"])]
            cells += [_pct(row[k]) for k in ("stub_cpu_pct", "server_cpu_pct", "client_cpu_pct")]
            cells += [_num(row["stub_rss"] / MIB, 1) if row.get("stub_rss") else "–"]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ratio_table(results: Results) -> str:
    lines = [
        "| workload | req/s ours/orig | backend ours/orig | p50 ours/orig "
        "| req/s ours/native | backend ours/native |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for key, entry in results["workloads"].items():

        def r(metric: str, other: str, key: str = key) -> str:
            return _fmt_ratio(
                _ratio(_get(results, key, "ours", metric), _get(results, key, other, metric))
            )

        lines.append(
            f"| {entry['title']} | {r('rate', 'original')} | {r('backend_us', 'original')} "
            f"| {r('p50_us', 'original')} | {r('rate', 'native')} | {r('backend_us', 'native')} |"
        )
    return "\n".join(lines)


def _mem(results: Results, backend: str, phase: str, field: str) -> float | None:
    value = results.get("memory", {}).get(backend, {}).get(phase, {}).get(field)
    return None if value is None else value / MIB


def resource_table(results: Results) -> str:
    rows: list[tuple[str, Callable[[str], float | None], int]] = [
        (
            "server start → READY, trivial model (ms, median)",
            lambda b: _scaled(results.get("load_time", {}).get(b, {}).get("median_s"), 1000),
            0,
        ),
        ("idle stub RSS (MiB)", lambda b: _mem(results, b, "idle", "stub_rss"), 1),
        ("post-burst stub RSS (MiB)", lambda b: _mem(results, b, "post_burst", "stub_rss"), 1),
        (
            "idle shared memory, allocated (MiB)",
            lambda b: _mem(results, b, "idle", "shm_allocated"),
            1,
        ),
        (
            "post-burst shared memory, allocated (MiB)",
            lambda b: _mem(results, b, "post_burst", "shm_allocated"),
            1,
        ),
        (
            "post-burst shared memory, mapped size (MiB)",
            lambda b: _mem(results, b, "post_burst", "shm_size"),
            1,
        ),
    ]
    lines = ["| metric | original | ours | native | ours/orig |", "|---|--:|--:|--:|--:|"]
    for title, get, digits in rows:
        vals = {b: get(b) for b in BACKENDS}
        cells = " | ".join(_num(vals[b], digits) for b in BACKENDS)
        lines.append(
            f"| {title} | {cells} | {_fmt_ratio(_ratio(vals['ours'], vals['original']))} |"
        )
    return "\n".join(lines)


def _scaled(value: float | None, factor: float) -> float | None:
    return None if value is None else value * factor


def targets(results: Results) -> list[dict[str, Any]]:
    """The issue's targets (ours vs original, same run); value None when not measurable."""

    def w(key: str, metric: str, other: str = "original") -> float | None:
        return _ratio(_get(results, key, "ours", metric), _get(results, key, other, metric))

    load = results.get("load_time", {})
    ours_load = load.get("ours", {}).get("median_s")
    orig_load = load.get("original", {}).get("median_s")
    idle_rss = _ratio(
        _mem(results, "ours", "idle", "stub_rss"), _mem(results, "original", "idle", "stub_rss")
    )
    burst, idle = (
        _mem(results, "ours", "post_burst", "shm_allocated"),
        _mem(results, "ours", "idle", "shm_allocated"),
    )
    kept = None if burst is None or idle is None else burst - idle
    # UV-33: what a BLS call adds at p50 over calling its target directly (bls_target is the
    # tiny workload's identity model, same config and payload).
    bls_p50, direct_p50 = (
        _get(results, "bls", "ours", "p50_us"),
        _get(results, "tiny_c1", "ours", "p50_us"),
    )
    bls_added = None if bls_p50 is None or direct_p50 is None else bls_p50 - direct_p50
    # UV-14: the overhead of a 4 KB identity at p50 over Triton's own in-process floor.
    ours_4k, native_4k = (
        _get(results, "4k_c1", "ours", "p50_us"),
        _get(results, "4k_c1", "native", "p50_us"),
    )
    added_4k = None if ours_4k is None or native_4k is None else ours_4k - native_4k
    checks = [
        ("tiny request backend time, ours/orig", w("tiny_c1", "backend_us"), "<=", 0.25),
        ("tiny request backend time, ours/native", w("tiny_c1", "backend_us", "native"), "<=", 2.0),
        ("tiny throughput at c16, ours/orig", w("tiny_c16", "rate"), ">=", 2.5),
        ("4 MiB backend time, ours/orig", w("4m_c1", "backend_us"), "<=", 0.5),
        ("64 MiB backend time, ours/orig", w("64m_c1", "backend_us"), "<=", 0.7),
        ("64 MiB backend time, ours/native", w("64m_c1", "backend_us", "native"), "<=", 1.25),
        (
            "BYTES decode of 5,000 strings, Python loop / ours (UV-11)",
            results.get("decode_speedup"),
            ">=",
            10.0,
        ),
        ("32-string BYTES echo backend time, ours/orig", w("bytes_echo", "backend_us"), "<=", 0.25),
        ("dynamic batching throughput, ours/orig", w("batch_c32", "rate"), ">=", 1.6),
        ("2-instance throughput, ours/orig", w("2inst_c8", "rate"), ">=", 1.6),
        ("BLS backend time of the calling model, ours/orig", w("bls", "backend_us"), "<=", 0.3),
        (
            "BLS call added at p50 over calling the target directly, ours (µs, UV-33)",
            bls_added,
            "<=",
            100.0,
        ),
        ("4 KiB identity p50, ours/orig (UV-14)", w("4k_c1", "p50_us"), "<=", 1.0),
        ("4 KiB identity p50 added over the native floor, ours (µs, UV-14)", added_4k, "<=", 50.0),
        ("decoupled responses/s, ours/orig", w("decoupled", "rate"), ">=", 5.0),
        ("trivial model load time, ours/orig", _ratio(ours_load, orig_load), "<=", 0.25),
        ("trivial model load time, ours (s)", ours_load, "<=", 0.35),
        ("idle stub RSS, ours/orig", idle_rss, "<=", 1.0),
        ("shared memory kept after the 64 MiB burst, ours (MiB)", kept, "<=", 16.0),
    ]
    out = []
    for title, value, op, goal in checks:
        ok = None if value is None else (value <= goal if op == "<=" else value >= goal)
        out.append({"target": title, "value": value, "goal": f"{op} {goal}", "ok": ok})
    return out


def target_table(results: Results) -> str:
    lines = ["| target | value | goal | status |", "|---|--:|--:|---|"]
    for t in results.get("targets", []):
        status = "n/a" if t["ok"] is None else ("PASS" if t["ok"] else "FAIL")
        value = "–" if t["value"] is None else f"{t['value']:.3g}"
        lines.append(f"| {t['target']} | {value} | {t['goal']} | {status} |")
    return "\n".join(lines)


def render(results: Results) -> str:
    meta = results["meta"]
    parts = [
        f"Machine: {meta['machine']}",
        f"Command: `{meta['command']}`",
        f"Revision: {meta.get('revision', 'unknown')}",
        f"Settings: {meta['settings']}",
        f"Date: {meta['date']}; load average {meta.get('load_average_at_start', 0):.1f} at start, "
        f"{meta.get('load_average_at_end', 0):.1f} at end ({meta.get('cpus', 2)} CPUs: "
        "above ~0.5 means other work)",
        "",
        "### Throughput, latency, backend time, CPU",
        workload_table(results),
        "",
        "### Ratios (same run, interleaved windows)",
        ratio_table(results),
        "",
        "### Load time and memory",
        resource_table(results),
        "",
        "### Targets (issue 6, and UV-14, UV-33)",
        target_table(results),
    ]
    return "\n".join(parts) + "\n"
