"""gRPC clients of tritonserver kept between the endpoint's requests. A new client is a new
channel and connection: on a 2-core machine about 2.5 ms on top of a small inference's 1.3-1.8
ms, and an embeddings request used two (one to read the model's configuration, one per lane).
A client serves one request at a time (tritonclient's holds one stream at a time), so a
request leases one and gives it back when it ends."""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Callable, Iterator, List, Set

from pybackend.cli.infer_client import Client

from .requests import ApiError

#: Idle clients kept at most: the endpoint's concurrent requests beyond this make and close
#: their own.
KEEP_IDLE = 16


class ClientPool:
    def __init__(self, make: Callable[[], Client], keep: int = KEEP_IDLE) -> None:
        self._make = make
        self._keep = keep
        self._lock = threading.Lock()
        self._idle: List[Client] = []
        self._spoiled: Set[int] = set()  # id() of leased clients not to keep
        self._closed = False

    @contextmanager
    def lease(self) -> Iterator[Client]:
        """A client of the request's own while the block runs: a kept one, else a new one.
        It is kept again when the block ends normally, or with an error that is an answer
        (an ApiError: a refusal, a model's failure, a timeout) or the HTTP client gone,
        unless the request met a broken connection to tritonserver (:meth:`spoil`). Then,
        and on any other error (a fault of the endpoint's own), it is closed with every kept
        one: their connections may be as broken, and closing them lets the next request's
        new client connect afresh instead of waiting out gRPC's reconnection backoff."""
        with self._lock:
            client = self._idle.pop() if self._idle else None
        if client is None:
            client = self._make()
        try:
            yield client
        except BaseException as e:
            self._end(client, _says_nothing_of_the_connection(e))
            raise
        self._end(client, True)

    def spoil(self, client: Client) -> None:
        """``client``, leased, met a broken connection (tritonserver unreachable), which its
        request turns into an answer (a 503, an error event of a stream): it is closed, and
        the kept ones with it, at the end of its lease."""
        with self._lock:
            self._spoiled.add(id(client))

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for client in idle:
            _close(client)

    def close(self) -> None:
        """Closes the kept clients; a lease still running closes its own when it ends."""
        with self._lock:
            self._closed = True
        self.close_idle()

    def _end(self, client: Client, sound: bool) -> None:
        with self._lock:
            if id(client) in self._spoiled:
                self._spoiled.discard(id(client))
                sound = False
            if sound and not self._closed and len(self._idle) < self._keep:
                self._idle.append(client)
                return
        _close(client)
        if not sound:
            self.close_idle()


def _says_nothing_of_the_connection(error: BaseException) -> bool:
    # An ApiError is an answer: the connection errors among them were spoiled where they
    # were met. ConnectionError: the endpoint's own HTTP client went away (a broken pipe
    # writing to it, or _check_client); tritonclient's errors come as ClientError instead.
    return isinstance(error, (ApiError, ConnectionError))


def _close(client: Client) -> None:
    try:
        client.close()
    except Exception:  # noqa: BLE001 - on an error path: the error that got here matters
        pass
