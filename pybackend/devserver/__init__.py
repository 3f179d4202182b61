"""A development server (UV-42): tritonserver's HTTP and gRPC inference endpoints for a
model repository's Python models, in this Python environment, without tritonserver.

    from pybackend.devserver import DevServer
    with DevServer("model_repository") as server:
        client = tritonclient.http.InferenceServerClient(server.http_url)

Or from a shell: ``pybackend devserve model_repository`` (docs/devserver.md).

Its scope is frozen: it serves what docs/devserver.md lists, for development (production is
tritonserver with this package's backend). Bugs are fixed; it is extended only where an
issue asks.
"""

from .errors import ServeError
from .server import DevServer, serve

__all__ = ["DevServer", "ServeError", "serve"]
