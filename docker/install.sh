#!/usr/bin/env bash
# install.sh: the one recipe that puts pybackend into an image. Both Dockerfiles run it, and CI
# runs it on the host into a temporary prefix (scripts/check_wheel.py), so the images' install
# steps are exercised on every `make test` although no Docker engine runs there.
#
#   install.sh [--prefix DIR] [--python PY] [--isolated] [--tritonserver-wheel VERSION]
#              [--replace-backend BACKENDS_DIR] WHEEL
#
# --prefix DIR          virtual environment for pybackend (default /opt/pybackend). It sees the
#                       interpreter's own site-packages (--system-site-packages), so a model's
#                       packages installed with the image's pip, and the image's numpy, are found
#                       by the stubs as they were by the original backend's.
# --python PY           interpreter that creates it and runs the stubs (default python3)
# --isolated            the venv does not see the interpreter's site-packages: CI uses it to
#                       prove that the wheel declares everything it needs
# --tritonserver-wheel VERSION
#                       also install the nvidia-pytriton wheel (without its dependencies) for its
#                       tritonserver binary: the CPU image, which has no NGC tritonserver
# --replace-backend BACKENDS_DIR
#                       tritonserver's backends directory (NGC image: /opt/tritonserver/backends):
#                       its python/ is moved to python.original/, a link to our backend takes its
#                       place, and BACKENDS_DIR-original/ is created with every backend as shipped
#                       (python: the original) for `--backend-directory=BACKENDS_DIR-original`
set -euo pipefail

prefix=/opt/pybackend
python=python3
tritonserver_wheel=""
site=--system-site-packages
backends=""
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) prefix=$2; shift 2 ;;
    --python) python=$2; shift 2 ;;
    --isolated) site=""; shift ;;
    --tritonserver-wheel) tritonserver_wheel=$2; shift 2 ;;
    --replace-backend) backends=${2%/}; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "install.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) break ;;
  esac
done
if [ $# -ne 1 ] || [ ! -f "$1" ]; then
  echo "install.sh: give exactly one pybackend wheel file (make wheel writes it to dist/)" >&2
  exit 2
fi
wheel=$1

say() { echo "install.sh: $*"; }

# A venv with pip where the interpreter has ensurepip; otherwise (Ubuntu without python3-venv,
# as in NGC's image) one without, driven by the interpreter's own pip, which it can see.
if [ ! -x "$prefix/bin/python3" ]; then
  if ! "$python" -m venv $site "$prefix" 2>/dev/null; then
    rm -rf "$prefix"
    "$python" -m venv $site --without-pip "$prefix"
  fi
fi
py="$prefix/bin/python3"
pip=("$py" -m pip --disable-pip-version-check)
"${pip[@]}" --version >/dev/null || {
  echo "install.sh: no pip for $python (Debian/Ubuntu: apt-get install python3-pip)" >&2
  exit 1
}

say "installing $(basename "$wheel") into $prefix"
"${pip[@]}" install "$wheel"
if [ -n "$tritonserver_wheel" ]; then
  # Only its tritonserver binary (and NVIDIA's backend) are used; its dependencies pin numpy<2.
  say "installing nvidia-pytriton==$tritonserver_wheel (its tritonserver) into $prefix"
  "${pip[@]}" install --no-deps "nvidia-pytriton==$tritonserver_wheel"
fi

# The backend starts its stubs with the interpreter named in python_executable next to the
# library; a wheel cannot know it, so it is written here, where the image may be read-only later.
backend_dir=$("$prefix/bin/pybackend" backend-dir)
printf '%s\n' "$py" >"$backend_dir/python/python_executable"
"$py" -c 'import numpy, pybackend.stub, triton_python_backend_utils' || {
  echo "install.sh: the stubs' interpreter $py cannot import numpy and pybackend" >&2
  exit 1
}
say "backend: $backend_dir/python (stubs run $py)"

if [ -n "$backends" ]; then
  original="$backends/python.original"
  if [ -d "$backends/python" ] && [ ! -L "$backends/python" ]; then
    [ ! -e "$original" ] || { echo "install.sh: $original exists already" >&2; exit 1; }
    mv "$backends/python" "$original"
  fi
  ln -sfn "$backend_dir/python" "$backends/python"
  # Every backend as shipped, for a switch back with one tritonserver flag.
  farm="$backends-original"
  mkdir -p "$farm"
  for entry in "$backends"/*; do
    name=$(basename "$entry")
    case "$name" in
      python) ;;
      python.original) [ -d "$entry" ] && ln -sfn "$entry" "$farm/python" ;;
      *) ln -sfn "$entry" "$farm/$name" ;;
    esac
  done
  say "$backends/python -> $backend_dir/python; NVIDIA's original: $original"
  say "switch back: tritonserver --backend-directory=$farm ..."
fi
