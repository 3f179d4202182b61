#!/usr/bin/env bash
# The CPU benchmark on the GPU machine (docs/gpu.md): `benchmarks.run` (ours vs the original vs
# the native floor) on its 16 idle cores, which the 2-core development machines cannot show.
# scripts/gpu_check.sh runs it as its last step, after the kit is unpacked and our backend is
# built; everything goes into one report file (a device call brings back at most 8 files):
# the machine (nproc, load, CPU model), how the original's environment was made, why the
# original could not start if it could not (its server's log), then the benchmark's own tables
# and notes, then its JSON after a "### JSON" line.
#
# The original's stub needs numpy<2 first on PATH and libpython3.12.so.1.0; the machine's
# python3 has numpy 2, so a venv of that python3 gets the kit's numpy1.tar.xz, and the kit's
# libpython goes on LD_LIBRARY_PATH only when the machine has none. benchmarks/preflight.py
# then starts a server with the original and one model, as the benchmark will, and prints how
# its stub runs or, if it cannot serve, its log; then ours and the native floor run alone.
#
# Then, with the time left and the original ready, the sync spin's A/B (issue 31 part 2,
# benchmarks/spin_ab.py): the single-round-trip rows with our spin in auto mode (on with 16
# cores) against it forced off, 3 interleaved runs a side, each against the original in the
# same run, with the spread. GPU_SPIN_AB=1 (default: after the benchmark), only (instead of
# it: give the step its time with GPU_CPU_BENCH_CAP), 0 (not at all). GPU_SPIN_AB_WORKLOADS:
# some of its rows only (space-separated, e.g. "bls"). GPU_SPIN_AB_SIDES: the
# two settings compared (default auto,off; a number is a fixed spin in µs, e.g. 300,auto).
#
# First, in ~15 s: the stub's own Python work per request in-process (benchmarks/hotpath.py,
# no server), what a spin leaves of the stub's side of a round trip on this machine's cores,
# and the same single calls each after 300 µs asleep (what a stub that slept between requests
# pays). GPU_HOTPATH=0 leaves it out.
#
# Usage: scripts/gpu_cpu_bench.sh REPORT [SECONDS]   (the benchmark's own cap, default 150)
#   PY, KIT, SITE as in gpu_check.sh (exported there); GPU_CPU_BENCH_ARGS (default --quick)
#   are benchmarks.run's options.
set -u

REPORT=${1:?usage: scripts/gpu_cpu_bench.sh REPORT [SECONDS]}
CAP=${2:-150}
PY=${PY:-python3}
KIT=${KIT:-.gpu-kit}
SITE=${SITE:-/tmp/pybackend-gpu-site}
ARGS=${GPU_CPU_BENCH_ARGS:---quick}
SPIN_AB=${GPU_SPIN_AB:-1}
T0=$(date +%s)
note() { echo "$*" >>"$REPORT"; }
elapsed() { echo "$(($(date +%s) - T0))s"; }

: >"$REPORT"
note "# CPU benchmark on the GPU machine, $(date -u +%FT%TZ)"
# The device's copy of .git can be stale (gpu_check.sh): the revision the caller named.
note "revision: ${GPU_CHECK_REVISION:-$(git rev-parse --short HEAD 2>/dev/null || echo '?')}"
note "nproc: $(nproc); load average: $(cut -d' ' -f1-3 /proc/loadavg)"
note "CPU: $(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)"
note "memory: $(awk '/^MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
note "python: $("$PY" -c 'import sys, numpy; print(sys.version.split()[0], "numpy", numpy.__version__)' 2>&1)"

# ---------------------------------------------------------------- the original's environment
# A venv of the machine's python3 without its site-packages, numpy<2 unpacked into it: the
# first python3 on PATH for the original's stub (benchmarks/server.py puts its bin/ first).
orig_env() {
    local venv="$SITE/orig-venv" version sp
    version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    [ -f "$KIT/numpy1.tar.xz" ] || { echo "the kit has no numpy1.tar.xz (GPU_KIT_ORIGINAL=0?)"; return 1; }
    stub="$SITE/pytriton/tritonserver/python_backend_stubs/$version/triton_python_backend_stub"
    [ -x "$stub" ] || { echo "the kit has no original stub for Python $version (only 3.12)"; return 1; }
    rm -rf "$venv"
    # Debian and Ubuntu split ensurepip off; without pip venv needs none, and where venv fails
    # all the same, the layout is made by hand (what getpath reads: bin/python3, pyvenv.cfg).
    "$PY" -m venv --without-pip "$venv" || {
        echo "venv failed: making $venv by hand"
        rm -rf "$venv" && mkdir -p "$venv/bin" && "$PY" - "$venv" <<'EOF' || return 1
import os, sys
base = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
os.symlink(base, os.path.join(sys.argv[1], "bin", "python3"))
with open(os.path.join(sys.argv[1], "pyvenv.cfg"), "w") as cfg:
    cfg.write(f"home = {os.path.dirname(base)}\ninclude-system-site-packages = false\n"
              f"version = {sys.version.split()[0]}\n")
EOF
    }
    sp="$venv/lib/python$version/site-packages"
    mkdir -p "$sp" && tar -C "$sp" -xJf "$KIT/numpy1.tar.xz" || return 1
    env -u PYTHONPATH "$venv/bin/python3" -c \
        'import numpy, sys; print("orig-venv numpy", numpy.__version__); sys.exit(numpy.__version__ >= "2")' ||
        { echo "the venv's numpy is not <2"; return 1; }
    # The stub links libpython3.X.so.1.0: the machine's own if it has one, else the kit's.
    local missing
    missing=$(LD_LIBRARY_PATH="$SITE/nvidia_pytriton.libs" ldd "$stub" | awk '/not found/ {print $1}')
    if [ -n "$missing" ] && [ -f "$SITE/pybackend-libpython/libpython$version.so.1.0" ]; then
        echo "the machine has no $missing: using the kit's ($SITE/pybackend-libpython)"
        export LD_LIBRARY_PATH="$SITE/pybackend-libpython${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
        missing=$(LD_LIBRARY_PATH="$SITE/nvidia_pytriton.libs:$LD_LIBRARY_PATH" ldd "$stub" |
            awk '/not found/ {print $1}')
    fi
    [ -z "$missing" ] || { echo "the original stub cannot load: $missing"; return 1; }
    echo "original stub: $stub"
}

backends=original,ours,native
export PYBACKEND_ORIG_VENV="$SITE/orig-venv" PYBACKEND_CACHE_DIR="$SITE/cache"
note ""
note "## The original's environment"
if orig_env >>"$REPORT" 2>&1 && timeout -k 5 75 "$PY" -m benchmarks.preflight >>"$REPORT" 2>&1; then
    note "original: ready ($(elapsed))"
else
    note "original: NOT RUN (the lines above say why); ours and native only ($(elapsed))"
    backends=ours,native
fi

# ---------------------------------------------------------------- the stub's hot path
if [ "${GPU_HOTPATH:-1}" != 0 ]; then
    note ""
    note "## python -m benchmarks.hotpath --rounds 2 --idle-us 300 (limit 60s)"
    timeout -k 5 60 "$PY" -m benchmarks.hotpath --rounds 2 --idle-us 300 >>"$REPORT" 2>&1
    note "hot path: rc=$? ($(elapsed) in all)"
fi

# ---------------------------------------------------------------- the benchmark
rc=0
json=$(mktemp "${TMPDIR:-/tmp}/pybackend-cpu-bench.XXXXXX.json")
if [ "$SPIN_AB" = only ]; then
    note "benchmark: skipped (GPU_SPIN_AB=only)"
else
    left=$((CAP - $(date +%s) + T0 - 5))
    note ""
    note "## python -m benchmarks.run $ARGS --backends $backends (limit ${left}s)"
    # shellcheck disable=SC2086
    timeout -k 10 "$left" "$PY" -m benchmarks.run $ARGS --backends "$backends" --json "$json" \
        >>"$REPORT" 2>&1
    rc=$?
    case $rc in
        0) note "benchmark: done ($(elapsed) in all)" ;;
        124 | 137) note "benchmark: TIMED OUT after ${left}s ($(elapsed) in all)" ;;
        *) note "benchmark: failed rc=$rc ($(elapsed) in all)" ;;
    esac
fi

# ---------------------------------------------------------------- the sync spin's A/B
left=$((CAP - $(date +%s) + T0 - 5))
if [ "$SPIN_AB" = 0 ]; then
    note "spin A/B: skipped (GPU_SPIN_AB=0)"
elif [ "$backends" != original,ours,native ]; then
    note "spin A/B: NOT RUN (it measures against the original, which could not start)"
elif [ "$left" -lt 40 ]; then
    note "spin A/B: NOT RUN (${left}s left of the cap, it needs 40s at least)"
else
    note ""
    sides=${GPU_SPIN_AB_SIDES:-auto,off}
    # GPU_SPIN_AB_WORKLOADS: some rows only (e.g. "bls"), space-separated; default all.
    read -r -a rows <<<"${GPU_SPIN_AB_WORKLOADS:-}"
    [ ${#rows[@]} -gt 0 ] && rows=(--workloads "${rows[@]}")
    note "## python -m benchmarks.spin_ab --sides $sides ${rows[*]} --budget $((left - 10)) (limit ${left}s)"
    timeout -k 10 "$left" "$PY" -m benchmarks.spin_ab --sides "$sides" "${rows[@]}" \
        --budget "$((left - 10))" >>"$REPORT" 2>&1
    ab=$?
    note "spin A/B: rc=$ab ($(elapsed) in all)"
    [ "$rc" -eq 0 ] && rc=$ab
fi
if [ -s "$json" ]; then
    note ""
    note "### JSON"
    cat "$json" >>"$REPORT"
fi
rm -f "$json"
exit $rc
