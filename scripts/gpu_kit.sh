#!/usr/bin/env bash
# Build the GPU kit: what the GPU machine lacks to run tests/gpu, in one folder that travels
# with the working tree (docs/gpu.md). That machine has python3 3.12 with torch, cupy, numpy,
# cmake and g++, but no network, no tritonserver and no tritonclient, and a call carries at
# most 64 MiB. So the kit holds:
#   tritonserver.tar.xz  the wheel's tritonserver binary and nvidia_pytriton.libs/, in the
#                        wheel's own layout (pytriton/tritonserver/bin, nvidia_pytriton.libs)
#                        so that pybackend.server.locate finds it once the folder it is
#                        unpacked into is on PYTHONPATH. Without the bundled libpython (a
#                        3.13 one, for the 3.13 stub only).
#   original.tar.xz      (GPU_KIT_ORIGINAL=1, the default) NVIDIA's original backend for the
#                        CPU benchmark there (ours vs the original on 16 idle cores): the wheel's
#                        backends/python and the cp312 stub, in the same layout (unpacked over
#                        tritonserver.tar.xz), and pybackend-libpython/libpython3.12.so.1.0
#                        (stripped), which the stub links: used only where the machine has no
#                        libpython3.12 of its own.
#   numpy1.tar.xz        numpy<2 for the original's stub (it breaks with numpy 2, the machine's):
#                        the cp312 wheel unpacked without its tests, to go into a venv's
#                        site-packages (xz -9 makes it 8 MiB; the wheel is 17).
#   wheels/              cp312 wheels for the gRPC client: tritonclient, grpcio, protobuf and
#                        python-rapidjson, at the versions in .venv (the combination the CPU
#                        suite runs). No HTTP client: its gevent stack is heavy and the tests
#                        need only gRPC (readiness is probed with the standard library).
#   MANIFEST             sizes and sha256 of the above.
#
# Usage: scripts/gpu_kit.sh [DEST] (default .gpu-kit); VENV=.venv picks the environment.
#   GPU_KIT_ORIGINAL=0       leave the original backend and numpy<2 out (about 10 MiB less)
#   GPU_KIT_LIBPYTHON=PATH   the libpython3.12.so.1.0 to carry (default: found on this machine)
set -euo pipefail

DEST=${1:-.gpu-kit}
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
# The GPU machine's interpreter and platform (x86-64, CPython 3.12, glibc >= 2.28).
TARGET_PY=${GPU_KIT_PYTHON_VERSION:-3.12}
CLIENT_PACKAGES=(tritonclient grpcio protobuf python-rapidjson)
ORIGINAL=${GPU_KIT_ORIGINAL:-1}
# The numpy<2 of .venv-orig (the one the CPU suite runs the original with).
NUMPY1_VERSION=${GPU_KIT_NUMPY1:-1.26.4}
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

[ -x "$PY" ] || { echo "gpu_kit: $PY not found; run make venv first" >&2; exit 1; }

site=$("$PY" - <<'EOF'
import importlib.util, pathlib
spec = importlib.util.find_spec("pytriton")
if spec is None:
    raise SystemExit("gpu_kit: nvidia-pytriton is not installed in this environment")
print(pathlib.Path(next(iter(spec.submodule_search_locations))).resolve().parent)
EOF
)
[ -x "$site/pytriton/tritonserver/bin/tritonserver" ] || {
    echo "gpu_kit: no tritonserver under $site/pytriton" >&2; exit 1; }

# The libpython3.12.so.1.0 to carry: named, or this machine's (a pyenv 3.12 or the system's).
find_libpython() {
    local cand
    for cand in "${GPU_KIT_LIBPYTHON:-}" \
        "$(ldconfig -p 2>/dev/null | awk '/libpython3\.12\.so\.1\.0 .*x86-64/ {print $NF; exit}')" \
        /root/.pyenv/versions/3.12*/lib/libpython3.12.so.1.0 \
        "$(python3.12 -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR"))' 2>/dev/null)/libpython3.12.so.1.0"; do
        [ -n "$cand" ] && [ -f "$cand" ] && { echo "$cand"; return 0; }
    done
    return 1
}

# original.tar.xz and numpy1.tar.xz (see the top). WORK SITE.
pack_original() {
    local work=$1 site=$2 orig="$1/orig" np="$1/numpy1" lib
    local server="$site/pytriton/tritonserver"
    mkdir -p "$orig/pytriton/tritonserver/backends/python" \
        "$orig/pytriton/tritonserver/python_backend_stubs/3.12" "$orig/pybackend-libpython" "$np"
    cp -a "$server/backends/python/libtriton_python.so" \
        "$server/backends/python/triton_python_backend_utils.py" \
        "$orig/pytriton/tritonserver/backends/python/"
    cp -a "$server/python_backend_stubs/3.12/triton_python_backend_stub" \
        "$orig/pytriton/tritonserver/python_backend_stubs/3.12/"
    if lib=$(find_libpython); then
        echo "gpu_kit: carrying $lib (stripped) for the original stub"
        cp -L "$lib" "$orig/pybackend-libpython/libpython3.12.so.1.0"
        strip --strip-unneeded "$orig/pybackend-libpython/libpython3.12.so.1.0"
    else
        echo "gpu_kit: WARNING no libpython3.12.so.1.0 here (set GPU_KIT_LIBPYTHON): the" \
            "original stub will run only where the GPU machine has its own" >&2
    fi
    tar -C "$orig" -cf - pytriton pybackend-libpython | nice xz -9 -T2 >"$work/kit/original.tar.xz"

    echo "gpu_kit: downloading numpy==$NUMPY1_VERSION for CPython $TARGET_PY (the original's stub)"
    "$PY" -m pip --disable-pip-version-check download -q --no-deps --only-binary=:all: \
        --python-version "$TARGET_PY" --implementation cp "${PLATFORMS[@]}" \
        -d "$work/numpy-wheel" "numpy==$NUMPY1_VERSION"
    "$PY" -m zipfile -e "$work"/numpy-wheel/numpy-*.whl "$np"
    # The tests and type stubs are a fifth of it and nothing imports them.
    find "$np" -depth \( -name tests -type d -o -name '*.pyi' \) -exec rm -rf {} +
    echo "gpu_kit: packing numpy $NUMPY1_VERSION (xz -9, takes a few minutes)"
    tar -C "$np" -cf - . | nice xz -9 -T2 >"$work/kit/numpy1.tar.xz"
}

# Built aside (outside the tree, so git never sees a half-built kit), moved in at the end.
work=$(mktemp -d "${TMPDIR:-/tmp}/pybackend-gpu-kit.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/kit/wheels" "$work/stage/pytriton/tritonserver"
stage="$work/stage"
# An empty pytriton/__init__.py makes the unpacked copy a regular package, so it wins over
# any other pytriton later on sys.path (find_spec never runs it).
: >"$stage/pytriton/__init__.py"
cp -a "$site/pytriton/tritonserver/bin" "$stage/pytriton/tritonserver/"
mkdir "$stage/nvidia_pytriton.libs"
find "$site/nvidia_pytriton.libs" -maxdepth 1 -type f ! -name 'libpython*' \
    -exec cp -a {} "$stage/nvidia_pytriton.libs/" \;
echo "gpu_kit: packing tritonserver (xz, takes a minute)"
tar -C "$stage" -cf - pytriton nvidia_pytriton.libs | nice xz -6 -T2 >"$work/kit/tritonserver.tar.xz"

# Pin each client package to the version .venv runs.
pins=()
for pkg in "${CLIENT_PACKAGES[@]}"; do
    version=$("$PY" -c "import importlib.metadata as m; print(m.version('$pkg'))")
    pins+=("$pkg==$version")
done
echo "gpu_kit: downloading ${pins[*]} for CPython $TARGET_PY"
"$PY" -m pip --disable-pip-version-check download -q --no-deps --only-binary=:all: \
    --python-version "$TARGET_PY" --implementation cp \
    "${PLATFORMS[@]}" -d "$work/kit/wheels" "${pins[@]}"

if [ "$ORIGINAL" = 1 ]; then
    pack_original "$work" "$site"
fi

revision=$(git rev-parse --short HEAD 2>/dev/null || echo '?')
(
    cd "$work/kit"
    {
        echo "# pybackend GPU kit, built $(date -u +%FT%TZ) at $revision"
        find . -type f ! -name MANIFEST | sort | while read -r f; do
            printf '%10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "${f#./}"
        done
    } >MANIFEST
)
rm -rf "$DEST"
mv "$work/kit" "$DEST"
cat "$DEST/MANIFEST"
tree=$(git ls-files -co --exclude-standard 2>/dev/null | tar -cf - -T - 2>/dev/null | wc -c)
echo "gpu_kit: $DEST is $(du -sm "$DEST" | cut -f1) MiB, the working tree $((tree / 1048576)) MiB" \
    "(a device call carries at most 64 MiB)"
