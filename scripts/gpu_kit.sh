#!/usr/bin/env bash
# Build the GPU kit: what the GPU machine lacks to run tests/gpu, in one folder that travels
# with the working tree (docs/gpu.md). That machine has python3 3.12 with torch, cupy, numpy,
# cmake and g++, but no network, no tritonserver and no tritonclient, and a call carries at
# most 64 MiB. So the kit holds:
#   tritonserver.tar.xz  the wheel's tritonserver binary and nvidia_pytriton.libs/, in the
#                        wheel's own layout (pytriton/tritonserver/bin, nvidia_pytriton.libs)
#                        so that pybackend.server.locate finds it once the folder it is
#                        unpacked into is on PYTHONPATH. Without the bundled libpython (only
#                        the original backend's stub uses it) and without the original
#                        backend: the GPU check runs ours.
#   wheels/              cp312 wheels for the gRPC client: tritonclient, grpcio, protobuf and
#                        python-rapidjson, at the versions in .venv (the combination the CPU
#                        suite runs). No HTTP client: its gevent stack is heavy and the tests
#                        need only gRPC (readiness is probed with the standard library).
#   MANIFEST             sizes and sha256 of the above.
#
# Usage: scripts/gpu_kit.sh [DEST] (default .gpu-kit); VENV=.venv picks the environment.
set -euo pipefail

DEST=${1:-.gpu-kit}
VENV=${VENV:-.venv}
PY="$VENV/bin/python"
# The GPU machine's interpreter and platform (x86-64, CPython 3.12, glibc >= 2.28).
TARGET_PY=${GPU_KIT_PYTHON_VERSION:-3.12}
CLIENT_PACKAGES=(tritonclient grpcio protobuf python-rapidjson)

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
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_24_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
    -d "$work/kit/wheels" "${pins[@]}"

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
echo "gpu_kit: $DEST is $(du -sm "$DEST" | cut -f1) MiB (a device call carries at most 64 MiB)"
