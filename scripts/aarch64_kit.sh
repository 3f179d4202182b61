#!/usr/bin/env bash
# Build the aarch64 kit: everything tests/platforms needs to run pybackend as an aarch64
# (Jetson, Grace, Graviton) machine would, on this x86-64 one, under qemu-user
# (docs/deployment.md, "aarch64"). Nothing is installed on the system; the folder holds:
#   dist/         the aarch64 wheel (manylinux_2_35_aarch64) and its sdist, made by
#                 scripts/build_wheel.sh with PYBACKEND_CROSS=aarch64, as `make wheel` makes
#                 the x86-64 one
#   build/        the native unit tests, cross-compiled with aarch64-linux-gnu-g++ (-Werror)
#   sysroot/      Debian's arm64 glibc, CPython 3.11 and the libraries they need, unpacked
#                 from the .deb files (a private apt state: the system's own stays as it is)
#   site/         the aarch64 interpreter's packages: numpy's aarch64 wheel and ours, unpacked
#                 (site/pybackend/backends is the backends directory, its python_executable
#                 naming python3 below)
#   pytriton/     the aarch64 nvidia-pytriton wheel unpacked: tritonserver 2.51 for aarch64
#   python3       a script that runs the aarch64 interpreter under qemu-aarch64 (the stubs')
#
# Usage: scripts/aarch64_kit.sh [DEST] (default .aarch64-kit). Needs aarch64-linux-gnu-g++
# and qemu-aarch64 (Debian: g++-aarch64-linux-gnu, qemu-user; .ci/run installs them), cmake,
# apt-get, the build tools' environment (DIST_VENV, default .venv-dist: make venv-dist) and
# network access to Debian's mirror and PyPI. Downloads are kept between runs; the wheel, the
# unit tests and site/ are made afresh each time (about two minutes on two cores).
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=$(realpath -m "${1:-.aarch64-kit}")
VENV=${VENV:-.venv}
DIST_VENV=${DIST_VENV:-.venv-dist}
PYTRITON_VERSION=${PYTRITON_VERSION:-0.7.0}
# Debian 12's arm64 CPython and what its standard library's extension modules link.
DEBS=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib zlib1g libexpat1 libffi8
    libssl3 libbz2-1.0 liblzma5 libsqlite3-0 libncursesw6 libtinfo6 libreadline8 libuuid1
    libcrypt1 libnsl2 libtirpc3 libdb5.3 libgssapi-krb5-2 libkrb5-3 libk5crypto3
    libkrb5support0 libcom-err2 libkeyutils1)

for tool in aarch64-linux-gnu-g++ qemu-aarch64 cmake apt-get; do
    command -v "$tool" >/dev/null || {
        echo "aarch64_kit: $tool not found (Debian: g++-aarch64-linux-gnu qemu-user cmake)" >&2
        exit 1
    }
done
[ -x "$VENV/bin/python" ] || { echo "aarch64_kit: $VENV not found; run make venv" >&2; exit 1; }
[ -x "$DIST_VENV/bin/auditwheel" ] || {
    echo "aarch64_kit: $DIST_VENV not found; run make venv-dist" >&2; exit 1; }
mkdir -p "$DEST"

# 1. The wheel, cross-built, and the native unit tests, warnings as errors (an aarch64-only
# warning fails here, not on a user's machine).
PYBACKEND_CROSS=aarch64 scripts/build_wheel.sh "$DIST_VENV" "$DEST/dist" >"$DEST/wheel.log" 2>&1 || {
    tail -40 "$DEST/wheel.log" >&2; exit 1; }
cmake -S . -B "$DEST/build" -DCMAKE_SYSTEM_NAME=Linux -DCMAKE_SYSTEM_PROCESSOR=aarch64 \
    -DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++ -DPYBACKEND_WERROR=ON \
    -DPYBACKEND_BUILD_TESTS=ON -DPYBACKEND_OUTPUT_DIR="$DEST/build/out" \
    -DPYBACKEND_NATIVE_DIR="$DEST/build/out" >/dev/null
cmake --build "$DEST/build" -j "$(nproc)" >"$DEST/build.log" 2>&1 || {
    tail -40 "$DEST/build.log" >&2; exit 1; }

# 2. The arm64 sysroot, from Debian's packages through a private apt state.
if [ ! -x "$DEST/sysroot/usr/bin/python3.11" ]; then
    apt_dir="$DEST/apt"
    mkdir -p "$apt_dir/lists/partial" "$apt_dir/archives/partial" "$apt_dir/debs"
    : >"$apt_dir/status"
    apt_opts=(-o APT::Architecture=arm64 -o APT::Architectures::=arm64
        -o Dir::State::Lists="$apt_dir/lists" -o Dir::State::status="$apt_dir/status"
        -o Dir::Cache="$apt_dir" -o Dir::Cache::archives="$apt_dir/archives"
        -o Debug::NoLocking=1 -o APT::Sandbox::User=root -q)
    apt-get "${apt_opts[@]}" update >"$apt_dir/update.log"
    (cd "$apt_dir/debs" && apt-get "${apt_opts[@]}" download "${DEBS[@]/%/:arm64}" >/dev/null)
    rm -rf "$DEST/sysroot"
    for deb in "$apt_dir"/debs/*.deb; do dpkg-deb -x "$deb" "$DEST/sysroot"; done
fi
# glibc and libstdc++ from the cross toolchain (the same ones the build links against).
mkdir -p "$DEST/sysroot/lib/aarch64-linux-gnu"
cp -a /usr/aarch64-linux-gnu/lib/. "$DEST/sysroot/lib/aarch64-linux-gnu/"
cp -a /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 "$DEST/sysroot/lib/"

# 3. The wheels: numpy for the aarch64 CPython 3.11, tritonserver for aarch64.
wheels="$DEST/wheels"
mkdir -p "$wheels"
if ! ls "$wheels"/numpy-*aarch64*.whl >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip --disable-pip-version-check download -q numpy --no-deps \
        --only-binary=:all: --python-version 3.11 --platform manylinux_2_28_aarch64 \
        --platform manylinux_2_27_aarch64 --platform manylinux_2_17_aarch64 -d "$wheels"
fi
if ! ls "$wheels"/nvidia_pytriton-*aarch64*.whl >/dev/null 2>&1; then
    "$VENV/bin/python" -m pip --disable-pip-version-check download -q \
        "nvidia-pytriton==$PYTRITON_VERSION" --no-deps --only-binary=:all: \
        --platform manylinux_2_35_aarch64 -d "$wheels"
fi
if [ ! -x "$DEST/pytriton/pytriton/tritonserver/bin/tritonserver" ]; then
    rm -rf "$DEST/pytriton"
    "$VENV/bin/python" -m zipfile -e "$wheels"/nvidia_pytriton-*aarch64*.whl "$DEST/pytriton"
    chmod +x "$DEST/pytriton/pytriton/tritonserver/bin/tritonserver"
fi

# 4. The stubs' packages: numpy's wheel and ours, unpacked as pip installs a plain wheel.
rm -rf "$DEST/site"
"$VENV/bin/python" -m zipfile -e "$wheels"/numpy-*aarch64*.whl "$DEST/site"
"$VENV/bin/python" -m zipfile -e "$DEST"/dist/pybackend-*-manylinux_2_35_aarch64.whl "$DEST/site"
# Bytecode, as pip writes it at install: the stubs never write any (PYTHONDONTWRITEBYTECODE),
# and compiling numpy and pybackend under emulation made each stub's start seconds longer.
# Bytecode does not depend on the architecture; this interpreter's minor version is the
# sysroot's (3.11), else the files are named for another version and simply not used.
"$VENV/bin/python" -m compileall -q -j 0 "$DEST/site" >/dev/null

# 5. The interpreter the stubs run, named by the backends directory.
cat >"$DEST/python3" <<EOF
#!/bin/sh
# CPython 3.11 for aarch64 (Debian's), under qemu-user, with the kit's site/ (aarch64_kit.sh).
S="$DEST/sysroot"
exec qemu-aarch64 -L "\$S" -E LD_LIBRARY_PATH="\$S/lib/aarch64-linux-gnu:\$S/usr/lib/aarch64-linux-gnu" \\
    -E PYTHONPATH="$DEST/site" "\$S/usr/bin/python3.11" "\$@"
EOF
chmod +x "$DEST/python3"
# What `pybackend backend-dir` writes where the wheel is installed: the stubs' interpreter.
echo "$DEST/python3" >"$DEST/site/pybackend/backends/python/python_executable"

"$DEST/python3" -c 'import platform, numpy; print("aarch64_kit:", platform.machine(),
    platform.python_version(), "numpy", numpy.__version__)'
