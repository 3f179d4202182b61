#!/usr/bin/env bash
# The whole GPU check in one call (docs/gpu.md): run from the repository root on the GPU
# machine, with the kit of scripts/gpu_kit.sh carried as .gpu-kit. It unpacks the kit, builds
# our backend from the tree with the machine's python3, writes an environment report, runs
# tests/gpu against the real tritonserver and leaves everything in OUTDIR:
#   summary.txt  one line per step (exit code, seconds) and the test counts
#   env.txt      nvidia-smi, driver, torch/cupy, a CUDA IPC probe, the stub's interpreter
#   build.log    kit unpack, wheel install and the CMake build
#   pytest.log   the full pytest output (-v -rA)
#   junit.xml    the same as JUnit XML (with the recorded device properties)
#   servers.log  the tritonserver logs of the tests' and the benchmark's servers
#   bench.txt    benchmarks/gpu_identity.py: 64 MiB GPU identity, zero copy vs host round trip
#                (its table is copied into summary.txt), then bench-pytriton's GPU row
#                (benchmarks/pytriton_bench.py --gpu-only); with GPU_BREAKDOWN also (only) the
#                breakdown: benchmarks/gpu_identity.py --breakdown, per-stage timers for each
#                setting (the lending pool, the DLPack hand-off) and the two copies alone
#                (issue 31 part 1)
#   cpu_bench.txt  scripts/gpu_cpu_bench.sh: benchmarks.run (quick mode) ours vs the original vs
#                native on the machine's idle cores, with nproc, load, CPU model, the original's
#                setup (or why it could not start), the sync spin's A/B (benchmarks/spin_ab.py)
#                and the JSON; only if time is left
# At most 8 files: that is what a device call brings back.
#
# Bounded: every step runs under `timeout`, and the whole script ends within GPU_CHECK_BUDGET
# seconds (default 390) even if something hangs; the tests leave GPU_BENCH_RESERVE (100) of
# them to the benchmark. The CPU benchmark runs last, only with at least GPU_CPU_BENCH_MIN (75)
# seconds left, for at most GPU_CPU_BENCH_CAP (150). On exit it kills every process it started
# (found by a marker variable in their environment, which tritonserver and stubs inherit).
# On a machine without a GPU it still produces the report; the tests skip with the reason.
#
# Usage: scripts/gpu_check.sh OUTDIR   (make gpu-check OUT=...)
#   PYTHON=python3           the interpreter to build for and test with (the stubs' too)
#   GPU_KIT=.gpu-kit         the kit folder; GPU_SITE=/tmp/pybackend-gpu-site where it goes
#   GPU_CHECK_BUDGET=390     seconds for the whole script; PYTEST_ARGS extra pytest arguments
#   GPU_BENCH_RESERVE=100    seconds kept for the benchmark; GPU_BENCH_REQUESTS=50 per row
#   GPU_CPU_BENCH_MIN=75, GPU_CPU_BENCH_CAP=150, GPU_CPU_BENCH_ARGS=--quick   the CPU benchmark
#                            (GPU_CPU_BENCH_CAP=0 skips it); GPU_SPIN_AB=1|only|0 the spin A/B
#   GPU_PYTRITON_BENCH=1|0   the GPU row of bench-pytriton after the GPU benchmark (120 s cap)
#                            after it, instead of it, or not (scripts/gpu_cpu_bench.sh)
#   GPU_BREAKDOWN=0|1|only   the GPU breakdown (docs/gpu.md "Where the time goes"): not (the
#                            default), after the GPU benchmark, or alone: then it runs right
#                            after the build, and tests/gpu afterwards, if time is left, with
#                            GPU_BREAKDOWN_TEST_ENV in its environment (default
#                            PYBACKEND_DLPACK_STREAM=legacy, the opt-in hand-off the breakdown
#                            compares); no GPU benchmark and no CPU benchmark.
#                            GPU_BREAKDOWN_REQUESTS=200 per row, GPU_BREAKDOWN_SWITCHES its
#                            settings (default 1,1:legacy)
set -u

OUT=${1:?usage: scripts/gpu_check.sh OUTDIR}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd)
cd "$REPO"
PY=${PYTHON:-python3}
KIT=${GPU_KIT:-.gpu-kit}
SITE=${GPU_SITE:-/tmp/pybackend-gpu-site}
BUDGET=${GPU_CHECK_BUDGET:-390}
BENCH_RESERVE=${GPU_BENCH_RESERVE:-100}
START=$(date +%s)
SUMMARY="$OUT/summary.txt"
MARKER="gpucheck-$$-$START"
export PYBACKEND_GPU_CHECK_RUN="$MARKER" PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
export PYBACKEND_GPU_SERVER_LOG="$OUT/servers.log"

# Every process carrying our marker, except this shell: what we started and what it started
# (tritonserver runs in its own session, stubs under it), however the step ended.
kill_ours() {
    local pid pids=()
    for pid in $(ls /proc | grep -E '^[0-9]+$'); do
        [ "$pid" = "$$" ] && continue
        if grep -qsxzF "PYBACKEND_GPU_CHECK_RUN=$MARKER" "/proc/$pid/environ"; then
            pids+=("$pid")
        fi
    done
    [ ${#pids[@]} -eq 0 ] && return 0
    echo "gpu_check: killing leftover processes: ${pids[*]}" | tee -a "$SUMMARY"
    kill -TERM "${pids[@]}" 2>/dev/null
    sleep 2
    kill -KILL "${pids[@]}" 2>/dev/null
    return 0
}
trap 'kill_ours' EXIT
trap 'exit 130' INT TERM

left() { echo $((START + BUDGET - $(date +%s))); }

# step NAME SECONDS LOG CMD...: run CMD bounded by SECONDS (and the budget), log, summarise.
step() {
    local name=$1 limit=$2 log=$3 t0 rc remaining
    shift 3
    remaining=$(($(left) - 15))
    [ "$limit" -gt "$remaining" ] && limit=$remaining
    if [ "$limit" -lt 5 ]; then
        printf '%-10s SKIPPED (budget spent)\n' "$name" >>"$SUMMARY"
        return 124
    fi
    t0=$(date +%s)
    echo "=== $name: $* (limit ${limit}s)" >>"$log"
    timeout -k 10 "$limit" "$@" >>"$log" 2>&1
    rc=$?
    printf '%-10s rc=%-3s %4ss  (log: %s)%s\n' "$name" "$rc" "$(($(date +%s) - t0))" "${log##*/}" \
        "$(case $rc in 124 | 137) echo ' TIMED OUT' ;; esac)" >>"$SUMMARY"
    return $rc
}

{
    echo "pybackend GPU check, $(date -u +%FT%TZ)"
    # The device tool copies the working tree but not always the matching .git: the caller can
    # name the revision it sent (GPU_CHECK_REVISION=$(git rev-parse --short HEAD) here).
    if [ -n "${GPU_CHECK_REVISION:-}" ]; then
        echo "revision: $GPU_CHECK_REVISION (as sent)"
    else
        echo "revision: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (+ uncommitted changes)')"
    fi
    echo "host: $(uname -srm), $(nproc) cores; python: $(command -v "$PY")"
} >"$SUMMARY"

# ---------------------------------------------------------------- the kit and the build
install_kit() {
    [ -f "$KIT/tritonserver.tar.xz" ] || { echo "no kit at $KIT (run scripts/gpu_kit.sh)"; return 1; }
    rm -rf "$SITE" && mkdir -p "$SITE"
    tar -C "$SITE" -xJf "$KIT/tritonserver.tar.xz" || return 1
    # The original backend and its stub, over the same layout (the CPU benchmark's).
    if [ -f "$KIT/original.tar.xz" ]; then
        tar -C "$SITE" -xJf "$KIT/original.tar.xz" || return 1
    fi
    # One wheel at a time: a wheel for another Python (the CPU dry run) is reported and
    # skipped; the interpreter's own copy of that package is used then.
    local whl status=0
    for whl in "$KIT"/wheels/*.whl; do
        "$PY" -m pip install -q --disable-pip-version-check --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target "$SITE" "$whl" || { echo "not installed: $whl"; status=2; }
    done
    return $status
}
export PY KIT SITE
step kit 90 "$OUT/build.log" bash -c "$(declare -f install_kit); install_kit"
export PYTHONPATH="$SITE:$REPO${PYTHONPATH:+:$PYTHONPATH}"
step build 200 "$OUT/build.log" env PYBACKEND_BUILD_JOBS="$(nproc)" "$PY" setup.py -q build_ext --inplace
build_rc=$?

# ---------------------------------------------------------------- the environment report
{
    echo "### nvidia-smi"
    timeout 30 nvidia-smi 2>&1 || echo "(nvidia-smi failed or is missing: no GPU here)"
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,compute_mode \
        --format=csv 2>&1
    echo "### stub interpreter (pybackend/backends/python/python_executable)"
    cat pybackend/backends/python/python_executable 2>&1
    echo "### tritonserver"
    "$PY" -c 'from pybackend.server import locate; print(locate.tritonserver_binary()); print(locate.tritonserver_library_dirs())' 2>&1
    echo "### PYTHONPATH=$PYTHONPATH"
} >"$OUT/env.txt"
step probe 90 "$OUT/env.txt" "$PY" scripts/gpu_env_probe.py
gpu=$("$PY" -c 'import torch; print("yes" if torch.cuda.is_available() else "no")' 2>/dev/null || echo "no (no torch)")
echo "GPU usable by torch: $gpu" >>"$SUMMARY"

# ---------------------------------------------------------------- the breakdown
# benchmarks/gpu_identity.py --breakdown into bench.txt, its tables into the summary.
breakdown() {
    step breakdown "$1" "$OUT/bench.txt" "$PY" -m benchmarks.gpu_identity --breakdown \
        --requests "${GPU_BREAKDOWN_REQUESTS:-200}" --switches "${GPU_BREAKDOWN_SWITCHES:-1,1:legacy}" \
        --server-log "$OUT/servers.log"
    # Only the breakdown's part of bench.txt (the GPU benchmark's table may come before it).
    awk '/^=== breakdown:/ { on = 1; next } on' "$OUT/bench.txt" |
        grep -E '^(GPU identity breakdown|gpu_identity|Copies alone|Stages|\|)' >>"$SUMMARY"
    kill_ours
}

# ---------------------------------------------------------------- the tests
if [ "$build_rc" -ne 0 ]; then
    echo "build failed: tests/gpu not run (see build.log)" >>"$SUMMARY"
elif [ "${GPU_BREAKDOWN:-0}" = "only" ]; then
    # The breakdown first (~1 minute on the H200), then the GPU suite on a path the default
    # run does not take (docs/gpu.md).
    breakdown "$(($(left) - 20))"
    test_env=${GPU_BREAKDOWN_TEST_ENV:-PYBACKEND_DLPACK_STREAM=legacy}
    echo "tests/gpu below ran with $test_env" >>"$SUMMARY"
    # shellcheck disable=SC2086
    step pytest "$(($(left) - 20))" "$OUT/pytest.log" env $test_env "$PY" -m pytest \
        tests/gpu -m gpu -v -rA -o junit_family=xunit1 -p no:cacheprovider --timeout=150 \
        --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-}
    grep -E '^(=+ .*(passed|failed|skipped|error|no tests ran).* =+)$' "$OUT/pytest.log" | tail -1 >>"$SUMMARY"
    grep -E '^(FAILED|ERROR) ' "$OUT/pytest.log" >>"$SUMMARY"
    kill_ours
else
    # The tests leave BENCH_RESERVE seconds of the budget to the benchmark.
    # shellcheck disable=SC2086
    step pytest "$(($(left) - 20 - BENCH_RESERVE))" "$OUT/pytest.log" "$PY" -m pytest tests/gpu \
        -m gpu -v -rA -o junit_family=xunit1 -p no:cacheprovider --timeout=150 \
        --junitxml="$OUT/junit.xml" ${PYTEST_ARGS:-}
    grep -E '^(=+ .*(passed|failed|skipped|error|no tests ran).* =+)$' "$OUT/pytest.log" | tail -1 >>"$SUMMARY"
    grep -E '^(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) ' "$OUT/pytest.log" >>"$SUMMARY"
    kill_ours
    # ------------------------------------------------------------ the GPU benchmark
    step bench "$BENCH_RESERVE" "$OUT/bench.txt" "$PY" -m benchmarks.gpu_identity \
        --requests "${GPU_BENCH_REQUESTS:-50}" --server-log "$OUT/servers.log"
    grep -E '^(GPU identity|gpu_identity|\|)' "$OUT/bench.txt" >>"$SUMMARY"
    kill_ours
    # The GPU row of `make bench-pytriton` (issue 30): a bound Tensor(device="cuda") identity
    # against a numpy callable's host round trip; GPU_PYTRITON_BENCH=0 skips it.
    # Into bench.txt: a file of its own would be a ninth with the CPU benchmark's (the device
    # call brings back 8).
    if [ "${GPU_PYTRITON_BENCH:-1}" != "0" ]; then
        step pytritonbench 120 "$OUT/bench.txt" "$PY" -m benchmarks.pytriton_bench \
            --gpu-only --gpu-requests "${GPU_BENCH_REQUESTS:-50}"
        awk '/^=== / { on = /^=== pytritonbench:/; next } on' "$OUT/bench.txt" |
            grep -E '^(GPU row|\|)' >>"$SUMMARY"
        kill_ours
    fi
    if [ "${GPU_BREAKDOWN:-0}" = "1" ]; then
        breakdown "${GPU_BREAKDOWN_CAP:-150}"
    fi
    # ------------------------------------------------------------ the CPU benchmark
    # Last and only if time is left: the GPU results come first.
    cpu_min=${GPU_CPU_BENCH_MIN:-75} cpu_cap=${GPU_CPU_BENCH_CAP:-150}
    cpu_left=$(($(left) - 15))
    if [ "$cpu_cap" -le 0 ]; then
        echo "cpubench   SKIPPED (GPU_CPU_BENCH_CAP=0)" >>"$SUMMARY"
    elif [ "$cpu_left" -lt "$cpu_min" ]; then
        echo "cpubench   SKIPPED (${cpu_left}s left of the budget, it needs ${cpu_min}s)" >>"$SUMMARY"
    else
        [ "$cpu_cap" -gt "$cpu_left" ] && cpu_cap=$cpu_left
        # Its own cap is 10 s inside the step's, so it can still write why it stopped.
        step cpubench "$cpu_cap" "$OUT/build.log" bash scripts/gpu_cpu_bench.sh \
            "$OUT/cpu_bench.txt" "$((cpu_cap - 10))"
        grep -E '^(nproc|CPU|original( backend)?|benchmark|decision|spin A/B):' \
            "$OUT/cpu_bench.txt" >>"$SUMMARY"
    fi
fi
kill_ours
trap - EXIT
echo "total $(($(date +%s) - START))s" >>"$SUMMARY"
cat "$SUMMARY"
