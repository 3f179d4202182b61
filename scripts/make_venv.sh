#!/usr/bin/env bash
# make_venv.sh PYTHON DIR: create a virtual environment, even where the distribution left out
# ensurepip (Debian without python3-venv): then pip is bootstrapped from its wheel on PyPI.
set -euo pipefail
python=$1
dir=$2
[ -x "$dir/bin/python3" ] && exit 0
if "$python" -m venv "$dir" 2>/dev/null; then
  exit 0
fi
rm -rf "$dir"
echo "make_venv: '$python -m venv' failed (Debian: apt-get install python3-venv);" \
  "creating $dir without pip and installing pip from its wheel on PyPI" >&2
"$python" -m venv --without-pip "$dir"
"$dir/bin/python3" - "$dir/pip-0-py3-none-any.whl" <<'PY'
import json, sys, urllib.parse, urllib.request
index = "https://pypi.org/pypi/pip/json"
meta = json.load(urllib.request.urlopen(index, timeout=120))
wheel = next(f["url"] for f in meta["urls"] if f["packagetype"] == "bdist_wheel")
urllib.request.urlretrieve(urllib.parse.urljoin(index, wheel), sys.argv[1])
PY
# A pip wheel can run itself: install pip from the wheel into the new environment.
"$dir/bin/python3" "$dir/pip-0-py3-none-any.whl/pip" install --quiet "$dir/pip-0-py3-none-any.whl"
rm -f "$dir/pip-0-py3-none-any.whl"
