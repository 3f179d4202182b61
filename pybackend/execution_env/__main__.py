"""``python -m pybackend.execution_env --model-dir DIR VALUE``: run by
the backend at model load; prints the prepared environment as one JSON object, or the
reason it cannot be used on stderr (exit status 1)."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from . import EnvError, package_parent, prepare


def main(argv: list) -> int:
    parser = argparse.ArgumentParser(prog="python -m pybackend.execution_env")
    parser.add_argument("--model-dir", required=True)
    # The directory holding pybackend: by default the one this module was imported from.
    parser.add_argument("--package-parent", default=package_parent())
    parser.add_argument("--cache", default=None)
    parser.add_argument("value")
    args = parser.parse_args(argv)
    try:
        env = prepare(args.value, args.model_dir, args.package_parent, args.cache)
    except EnvError as e:
        print(e, file=sys.stderr)
        return 1
    print(json.dumps(asdict(env)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
