"""Shared helpers of the conformance suite (backend choice, server launch, clients).

Kept in a package next to the suite's conftest.py so every feature folder imports the
same helpers regardless of pytest's import mode (conftest.py puts this folder's parent
on sys.path).
"""
