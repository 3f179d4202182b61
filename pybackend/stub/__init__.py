"""The stub process: ``python -m pybackend.stub --instance NAME`` runs one model instance
and serves the backend over the channels of docs/protocol.md."""
