#!/usr/bin/env bash
# install_torch_cpu.sh VENV: put torch's CPU-only build into a test environment, from a local
# wheel, so that the torch cases of the suite (model.py code written with torch and DLPack,
# tests/conformance/torch_interop, tests/instances) run on a machine without a GPU.
#
# Only a local CPU wheel is used (torch-*+cpu-cpXY-*.whl in TORCH_WHEELS, default: pip's
# find-links, else /opt/wheels), installed with --no-deps: torch from an index brings the CUDA
# packages (gigabytes). `import torch`, tensors, torch.nn and DLPack need only typing_extensions
# of torch's dependencies (sympy, networkx, jinja2, fsspec and filelock serve torch.compile,
# torch.fx and hub downloads, which no case uses).
# Where there is no wheel for the environment's Python (torch 2.13 needs 3.10+; no 3.13 wheel
# here), nothing is installed and the torch cases skip ("torch not installed in this stub
# environment"). Cheap when torch is already there: make runs it on every `make venv`.
set -euo pipefail
venv=$1
python="$venv/bin/python3"

if compgen -G "$venv/lib/python3*/site-packages/torch-*.dist-info" >/dev/null; then
  exit 0
fi
tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
arch=$(uname -m)
dirs=${TORCH_WHEELS:-${PIP_FIND_LINKS:-$("$python" -m pip config get global.find-links 2>/dev/null || true)}}
dirs=${dirs:-/opt/wheels}
wheel=""
for dir in $dirs; do
  dir=${dir#file://}
  [ -d "$dir" ] || continue
  found=$(ls "$dir"/torch-*+cpu-"$tag"-"$tag"-*linux*_"$arch".whl 2>/dev/null | sort -V | tail -n 1 || true)
  [ -n "$found" ] && wheel=$found
done
if [ -z "$wheel" ]; then
  echo "install_torch_cpu: no torch CPU wheel for $tag ($arch) in: $dirs;" \
    "$venv gets no torch and the torch cases skip there"
  exit 0
fi
echo "install_torch_cpu: $(basename "$wheel") into $venv"
"$python" -m pip --disable-pip-version-check -q install --no-deps "$wheel" 'typing_extensions>=4.10'
