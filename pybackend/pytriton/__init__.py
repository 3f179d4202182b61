"""PyTriton's public API served by pybackend: change ``pytriton.`` to
``pybackend.pytriton.`` in the imports (docs/pytriton.md). The bound callables run in this
process, which our backend attaches to as the stub of each model instance."""
