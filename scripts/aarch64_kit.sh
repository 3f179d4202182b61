#!/usr/bin/env bash
# Build the aarch64 kit: everything tests/platforms needs to run pybackend as an aarch64
# (Jetson, Grace, Graviton) machine would, on this x86-64 one, under qemu-user
# (docs/deployment.md, "aarch64"). Nothing is installed on the system; the folder holds:
#   build/        the backend, the stub's native helper and the native unit tests,
#                 cross-compiled with aarch64-linux-gnu-g++ (-Werror)
#   sysroot/      Debian's arm64 glibc, CPython 3.11 and the libraries they need, unpacked
#                 from the .deb files (a private apt state: the system's own stays as it is)
#   site/         for the aarch64 interpreter: numpy's aarch64 wheel, this checkout's
#                 pybackend and triton_python_backend_utils with the aarch64 native helper
#   pytriton/     the aarch64 nvidia-pytriton wheel unpacked: tritonserver 2.51 for aarch64
#   backends/python/  the aarch64 libtriton_python.so, its python_executable naming
#   python3       a script that runs the aarch64 interpreter under qemu-aarch64 (the stubs')
#
# Usage: scripts/aarch64_kit.sh [DEST] (default .aarch64-kit). Needs aarch64-linux-gnu-g++
# and qemu-aarch64 (Debian: g++-aarch64-linux-gnu, qemu-user; .ci/run installs them), cmake,
# apt-get and network access to Debian's mirror and PyPI. Downloads are kept between runs;
# the build and the copy of the package are made afresh each time (about a minute).
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=$(realpath -m "${1:-.aarch64-kit}")
VENV=${VENV:-.venv}
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
mkdir -p "$DEST"

# 1. Cross-build, warnings as errors (an aarch64-only warning fails here, not on a user's box).
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

# 4. The stubs' packages: numpy, and this checkout's pybackend with the aarch64 helper.
rm -rf "$DEST/site"
"$VENV/bin/python" -m zipfile -e "$wheels"/numpy-*aarch64*.whl "$DEST/site"
cp -r pybackend triton_python_backend_utils.py "$DEST/site/"
find "$DEST/site/pybackend" \( -name __pycache__ -o -name "*.so" \) -prune -exec rm -rf {} +
rm -f "$DEST/site/pybackend/backends/python/python_executable"
cp "$DEST/build/out/libpybackend_native.so" "$DEST/site/pybackend/utils/"

# 5. The interpreter the stubs run, and the backends directory naming it.
cat >"$DEST/python3" <<EOF
#!/bin/sh
# CPython 3.11 for aarch64 (Debian's), under qemu-user, with the kit's site/ (aarch64_kit.sh).
S="$DEST/sysroot"
exec qemu-aarch64 -L "\$S" -E LD_LIBRARY_PATH="\$S/lib/aarch64-linux-gnu:\$S/usr/lib/aarch64-linux-gnu" \\
    -E PYTHONPATH="$DEST/site" "\$S/usr/bin/python3.11" "\$@"
EOF
chmod +x "$DEST/python3"
mkdir -p "$DEST/backends/python"
cp "$DEST/build/out/libtriton_python.so" "$DEST/backends/python/"
echo "$DEST/python3" >"$DEST/backends/python/python_executable"

"$DEST/python3" -c 'import platform, numpy; print("aarch64_kit:", platform.machine(),
    platform.python_version(), "numpy", numpy.__version__)'
