"""gRPC clients of tritonserver kept between the endpoint's requests. A new client is a new
connection: on a 2-core machine it cost about 2.5 ms on top of a small inference's 1.3-1.8
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
        It is kept again when the block ends normally, or with an error that says nothing of
        the connection (a refused request, the HTTP client gone). Any other error closes it
        and every kept one: their connections may be as broken, and a new channel starts
        without gRPC's reconnection backoff, so the next request does not fail for them."""
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
        """``client``, leased, met a connection error that its request turned into an answer
        (an error event of a stream): it is closed, and the kept ones with it, at the end of
        its lease."""
        with self._lock:
            self._spoiled.add(id(client))

    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def close_idle(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for client in idle:
            client.close()

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
        client.close()
        if not sound:
            self.close_idle()


def _says_nothing_of_the_connection(error: BaseException) -> bool:
    # 4xx: the request was refused (a bad field, an unknown model) by a server that answered.
    # ConnectionError: the endpoint's own HTTP client went away (a broken pipe writing to it).
    if isinstance(error, ApiError):
        return error.status < 500
    return isinstance(error, ConnectionError)
