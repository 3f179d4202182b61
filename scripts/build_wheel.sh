#!/usr/bin/env bash
# build_wheel.sh TOOLS_VENV OUT_DIR: the sdist and the binary wheel, as a user gets them.
#
# `python -m build` makes the sdist, then builds the wheel FROM the sdist (a file missing from
# MANIFEST.in fails here, not on a user's machine). auditwheel then checks the libraries' symbol
# versions against the manylinux policy and retags the wheel: manylinux_2_35 is what a build on
# glibc 2.36 / GCC 12 truly meets (GLIBCXX_3.4.30 is the highest symbol version), and what
# NGC's tritonserver 24.10 image (Ubuntu 22.04, glibc 2.35) can install. Naming the tag makes a
# toolchain change that raises it fail this build instead of silently narrowing the wheel.
set -euo pipefail
tools=$1
out=$2
# PYBACKEND_CROSS=aarch64: the wheel cross-built for aarch64 (setup.py), checked for that policy.
plat=${PYBACKEND_WHEEL_PLAT:-manylinux_2_35_${PYBACKEND_CROSS:-$(uname -m)}}
raw="$out/raw"
rm -rf "$out"
mkdir -p "$raw"
PATH="$(cd "$tools/bin" && pwd):$PATH"
python -m build --outdir "$raw" .
# auditwheel offers only the host's policies to --plat; for a cross-built wheel "auto" reads
# the wheel's architecture, and the tag it gave is checked against the expected one below.
repair_plat=$plat
[ -z "${PYBACKEND_CROSS:-}" ] || repair_plat=auto
auditwheel repair --plat "$repair_plat" --wheel-dir "$out" "$raw"/pybackend-*.whl
ls "$out"/pybackend-*-"$plat".whl >/dev/null || {
    echo "build_wheel: auditwheel did not make a $plat wheel:" >&2; ls "$out" >&2; exit 1; }
mv "$raw"/pybackend-*.tar.gz "$out"/
rm -rf "$raw"
ls -l "$out"
