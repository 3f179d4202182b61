#!/usr/bin/env bash
# test_stub_pythons.sh VENV [VERSION ...]: the conformance suite with our stubs under other
# CPython minor versions (UV-22: one pure-Python stub for 3.9-3.13, no per-version build).
# For each version whose interpreter (python3.X) is on PATH, a venv .venv-py3.X with numpy
# and ml_dtypes runs the stubs (PYBACKEND_PYTHON); the server and pytest stay in VENV.
# python3.X comes from PATH or pyenv; a version with neither is reported and left out.
# torch's CPU build goes in where a local wheel fits the version (install_torch_cpu.sh; torch
# 2.13 has none for 3.9, and this machine's wheel is 3.11's): elsewhere the torch cases skip.
set -uo pipefail
venv=$1
shift
status=0
for version in "$@"; do
  python=$(command -v "python$version" || true)
  if [ -z "$python" ] || ! "$python" -c 'import venv' 2>/dev/null; then
    # pyenv's shim answers only for the selected versions: ask pyenv for an installed one.
    found=$(pyenv versions --bare 2>/dev/null | grep -E "^$version\.[0-9]+$" | tail -n 1)
    python=${found:+$(pyenv root)/versions/$found/bin/python$version}
  fi
  if [ -z "$python" ] || ! "$python" -c 'import venv' 2>/dev/null; then
    echo "test-pythons: no python$version on this machine: the stub is not checked under it"
    continue
  fi
  dir=".venv-py$version"
  if [ ! -f "$dir/.deps-installed" ]; then
    rm -rf "$dir"
    scripts/make_venv.sh "$python" "$dir" &&
      "$dir/bin/python3" -m pip --disable-pip-version-check -q install numpy ml_dtypes &&
      touch "$dir/.deps-installed" || { status=1; continue; }
  fi
  scripts/install_torch_cpu.sh "$dir" || status=1
  echo "test-pythons: the conformance suite with the stubs under $("$dir/bin/python3" --version)"
  # PYBACKEND_TEST_STUB_RERUN: cases that run no stub of ours skip (the default run did them).
  PYBACKEND_TEST_STUB_RERUN=1 PYBACKEND_PYTHON="$PWD/$dir/bin/python3" \
    "$venv/bin/pytest" tests/conformance -q || status=1
done
exit $status
