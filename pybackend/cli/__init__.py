"""The `pybackend` command line."""
