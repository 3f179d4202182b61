#!/usr/bin/env bash
# The next device session's first call in one command (docs/gpu.md, "Not run on a GPU yet"):
# the parts that plan names, each a run of scripts/gpu_check.sh with its own budget and output
# folder, each folder packed into OUTDIR/<part>.tar.gz (a device call brings back at most 8
# files), and their summaries printed at the end (what the device tool shows of the output).
#
#   a  issue 29: tests/gpu's shared-instance cases (four KIND_GPU instances in one process)
#   b  issue 31 part 1: the breakdown (pool on; proxy against legacy DLPack hand-off), then
#      tests/gpu under PYBACKEND_DLPACK_STREAM=legacy
#   c  issue 31 part 2: the spin A/B (auto against off) on the 16 cores, after the stub's hot
#      path in-process (benchmarks.hotpath, warm and after 300 µs asleep)
#
# Usage: GPU_CHECK_REVISION=<rev> bash scripts/gpu_next.sh OUTDIR [PARTS]
#   PARTS: which parts and in what order (default "a b c"); run with carry [".gpu-kit"] after
#   `make gpu-kit`. GPU_NEXT_BUDGET (default 570) bounds the whole command, so the call ends
#   inside the device tool's 600 s limit: a part gets its budget or what is left, whichever is
#   less, and is skipped when what is left is below its minimum.
#   GPU_CHECK_SCRIPT (default scripts/gpu_check.sh) is what each part runs (the tests swap in
#   a recorder).
set -u

OUT=${1:?usage: GPU_CHECK_REVISION=<rev> bash scripts/gpu_next.sh OUTDIR [PARTS]}
PARTS=${2:-a b c}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
cd "$(dirname "$0")/.."
TOTAL=${GPU_NEXT_BUDGET:-570}
CHECK=${GPU_CHECK_SCRIPT:-scripts/gpu_check.sh}
START=$(date +%s)
left() { echo $((TOTAL - ($(date +%s) - START))); }

# part -> its budget and the least it can do with (seconds): the CPU benchmark of part c
# needs GPU_CPU_BENCH_MIN (60) after the build.
budget() {
    case $1 in
        a) echo "110 60" ;;
        b) echo "300 200" ;;
        c) echo "170 120" ;;
        *) echo "0 0" ;;
    esac
}
run_part() {
    local part=$1 b=$2 dir="$OUT/$1"
    case $part in
        a) env GPU_CHECK_BUDGET="$b" GPU_BENCH_RESERVE=0 GPU_PYTRITON_BENCH=0 \
            GPU_CPU_BENCH_CAP=0 PYTEST_ARGS="-k shared_instances" \
            bash "$CHECK" "$dir" ;;
        b) env GPU_CHECK_BUDGET="$b" GPU_BREAKDOWN=only bash "$CHECK" "$dir" ;;
        c) env GPU_CHECK_BUDGET="$b" GPU_CPU_BENCH_CAP=150 GPU_CPU_BENCH_MIN=60 \
            GPU_BENCH_RESERVE=0 GPU_PYTRITON_BENCH=0 GPU_SPIN_AB=only \
            GPU_SPIN_AB_SIDES=auto,off PYTEST_ARGS="-k no_such_test_here" \
            bash "$CHECK" "$dir" ;;
    esac
}

for part in $PARTS; do
    read -r b least <<<"$(budget "$part")"
    if [ "$b" -eq 0 ]; then
        echo "gpu_next: unknown part '$part' (a, b or c)" | tee -a "$OUT/next.txt"
        continue
    fi
    now_left=$(left)
    if [ "$now_left" -lt "$least" ]; then
        echo "gpu_next: part $part skipped: needs at least ${least}s, ${now_left}s left" |
            tee -a "$OUT/next.txt"
        continue
    fi
    [ "$now_left" -lt "$b" ] && b=$now_left
    t0=$(date +%s)
    run_part "$part" "$b" >"$OUT/$part.console.txt" 2>&1
    rc=$?
    mv "$OUT/$part.console.txt" "$OUT/$part/console.txt" 2>/dev/null
    echo "gpu_next: part $part rc=$rc in $(($(date +%s) - t0))s (budget ${b}s)" |
        tee -a "$OUT/next.txt"
    if [ -d "$OUT/$part" ]; then
        tar -C "$OUT" -czf "$OUT/$part.tar.gz" "$part" && rm -rf "${OUT:?}/$part"
    fi
done

for part in $PARTS; do
    [ -f "$OUT/$part.tar.gz" ] || continue
    echo "===== part $part: summary.txt"
    tar -xzOf "$OUT/$part.tar.gz" "$part/summary.txt" 2>/dev/null | tail -n 60
done
echo "gpu_next: done in $(($(date +%s) - START))s (budget ${TOTAL}s)"
