#!/usr/bin/env bash
# Checks that NVIDIA's original stub (from the nvidia-pytriton wheel in .venv) can start with
# the Python of the given environment: it needs a stub built for that Python version and the
# shared libpython3.X, which Debian ships separately (package libpython3.X).
set -euo pipefail
orig_venv=${1:-.venv-orig}
venv=${VENV:-.venv}

version=$("$orig_venv/bin/python3" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
stub=$(ls "$venv"/lib/python3*/site-packages/pytriton/tritonserver/python_backend_stubs/"$version"/triton_python_backend_stub 2>/dev/null | head -n 1 || true)
if [ -z "$stub" ]; then
  echo "check_original_stub: no original stub for Python $version in $venv (nvidia-pytriton installed?)" >&2
  exit 1
fi
libs=$(dirname "$stub")/../../../../nvidia_pytriton.libs
missing=$(LD_LIBRARY_PATH="$libs" ldd "$stub" | awk '/not found/ {print $1}')
if [ -n "$missing" ]; then
  echo "check_original_stub: $stub cannot load: $missing" >&2
  echo "check_original_stub: install the shared Python library, e.g. apt-get install libpython$version" >&2
  exit 1
fi
echo "check_original_stub: original stub for Python $version loads ($stub)"
