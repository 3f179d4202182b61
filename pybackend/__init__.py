"""pybackend: a drop-in replacement for Triton's Python backend."""

__version__ = "0.1.0"
