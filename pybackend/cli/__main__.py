"""`python -m pybackend.cli ...` is the same as the `pybackend` command."""

from pybackend.cli.main import main

raise SystemExit(main())
