"""Tables of the instances benchmark (issue 29): one row per model and mode, ratios
against ``own`` on the same model in the same run, and the issue's targets."""

from __future__ import annotations

from typing import Any

from benchmarks.instances_repo import MODELS, MODES

MIB = 2**20

#: (model key, mode) -> (PSS at most, load time at most, req/s at least, processes) x own
TARGETS = {
    ("init", "shared"): (0.35, 0.5, 0.9, 1),
    ("import", "fork"): (0.45, 0.5, 0.9, None),
}


def _median(values: list[float]) -> float | None:
    return sorted(values)[len(values) // 2] if values else None


def ratios(rows: dict[str, Any], mode: str) -> dict[str, float | None]:
    """mode / own of stubs PSS (after traffic), median load time and req/s."""
    own, row = rows.get("own", {}), rows.get(mode, {})
    out: dict[str, float | None] = {"pss": None, "load": None, "req_s": None}
    if "error" in own or "error" in row or "req_s" not in row or "req_s" not in own:
        return out
    own_pss = own["memory_after"]["stubs_pss"]
    out["pss"] = row["memory_after"]["stubs_pss"] / own_pss if own_pss else None
    own_load, load = _median(own["load_s"]), _median(row["load_s"])
    out["load"] = load / own_load if load and own_load else None
    out["req_s"] = row["req_s"] / own["req_s"] if own["req_s"] else None
    return out


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    lines = [
        f"Revision `{meta['revision']}`; {meta['machine']}; load average "
        f"{meta['loadavg_start'][0]:.1f} at the start, {meta.get('loadavg_end', [0])[0]:.1f} "
        f"at the end; {meta.get('minutes', 0):.1f} min.",
        f"Command: `{meta['command']}`",
        f"{meta['instances']} instances, {meta['array_mib']} MiB of weights, heavy import: "
        f"{', '.join(meta['heavy_import']) or 'none'}; {meta['matmuls']} matmuls/request, "
        f"concurrency {meta['concurrency']}, BLAS threads {meta['blas_threads']}; "
        f"{meta['rounds']} x {meta['window_s']} s windows per mode, interleaved; "
        f"median of {meta['load_reps']} load requests.",
        "",
        "| model | mode | processes | load s | stubs PSS MiB loaded | stubs PSS MiB after "
        "| server PSS MiB | req/s | p50 ms | answers checked | PSS x own | load x own "
        "| req/s x own |",
        "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for model in MODELS:
        rows = results["models"].get(model.key)
        if rows is None:
            continue
        for mode in MODES:
            row = rows[mode]
            head = f"| {model.title} | {mode} |"
            if "error" in row:
                lines.append(f"{head} n/a ({row['error'][:120]}) |" + " |" * 10)
                continue
            loaded, after = row["memory_loaded"], row["memory_after"]
            r = ratios(rows, mode)
            checked = f"{row['completed']:,}" + (f" ({row['wrong']} WRONG)" if row["wrong"] else "")
            lines.append(
                f"{head} {after['processes']} | {_median(row['load_s']):.2f} | "
                f"{loaded['stubs_pss'] / MIB:,.0f} | {after['stubs_pss'] / MIB:,.0f} | "
                f"{after['server_pss'] / MIB:,.0f} | {row['req_s']:,.1f} | {row['p50_ms']:.1f} | "
                f"{checked} | {_x(r['pss'])} | {_x(r['load'])} | {_x(r['req_s'])} |"
            )
    lines += ["", "| target (issue 29) | measured | goal | verdict |", "|---|--:|--:|---|"]
    for (key, mode), (pss, load, rate, procs) in TARGETS.items():
        rows = results["models"].get(key)
        if rows is None:
            continue
        r = ratios(rows, mode)
        checks = [("PSS", r["pss"], pss, False), ("load time", r["load"], load, False)]
        checks.append(("req/s", r["req_s"], rate, True))
        for what, got, goal, at_least in checks:
            ok = got is not None and (got >= goal if at_least else got <= goal)
            sign = ">=" if at_least else "<="
            lines.append(
                f"| {key} model, {mode}: {what} x own | {_x(got)} | {sign} {goal}x | "
                f"{'PASS' if ok else 'FAIL'} |"
            )
        if procs is not None:
            got_p = rows[mode].get("memory_after", {}).get("processes")
            verdict = "PASS" if got_p == procs else "FAIL"
            lines.append(f"| {key} model, {mode}: processes | {got_p} | {procs} | {verdict} |")
    return "\n".join(lines) + "\n"


def failures(results: dict[str, Any]) -> list[str]:
    """What makes the run fail: a wrong answer or a mode that did not run (targets do not)."""
    bad = []
    for key, rows in results["models"].items():
        for mode, row in rows.items():
            if "error" in row:
                bad.append(f"{key}_{mode}: {row['error']}")
            elif row.get("wrong"):
                bad.append(
                    f"{key}_{mode}: {row['wrong']} wrong answers, first: {row['first_wrong']}"
                )
            elif not row.get("completed"):
                bad.append(f"{key}_{mode}: no request completed")
    return bad
