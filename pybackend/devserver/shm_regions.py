"""The system shared-memory extension: clients on this host register POSIX shared-memory
objects (``tritonclient.utils.shared_memory``) as named regions, then send inputs from them
and have outputs written into them instead of carrying the bytes in the request. The
registry keeps each region mapped; the texts and codes of what it refuses are tritonserver
2.51's (the differential tests compare them). CUDA shared memory needs a GPU: its status is
empty, as on a tritonserver without one, and registering is refused."""

from __future__ import annotations

import mmap
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ..utils.errors import ErrorCode
from .errors import ServeError

#: Where Linux keeps POSIX shared-memory objects (what ``shm_open(key)`` opens).
SHM_DIR = "/dev/shm"
CUDA_UNSUPPORTED = (
    "CUDA shared memory is not supported by the development server (it runs without a GPU): "
    "send the data in the request or register system shared memory"
)

#: Where a tensor's bytes are: (region name, offset, byte size).
Place = Tuple[str, int, int]


@dataclass
class Region:
    name: str
    key: str
    offset: int
    byte_size: int
    mapping: mmap.mmap
    fd: int  # kept open: each access checks that the object still covers the region

    def close(self) -> None:
        self.mapping.close()
        os.close(self.fd)

    def status(self) -> Dict[str, Any]:
        return {
            "name": self.name,
            "key": self.key,
            "offset": self.offset,
            "byte_size": self.byte_size,
        }


class Regions:
    """The registered regions by name; safe to use from the servers' threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._regions: Dict[str, Region] = {}

    def register(self, name: str, key: str, offset: int, byte_size: int) -> None:
        with self._lock:
            if name in self._regions:
                raise ServeError(
                    f"shared memory region '{name}' already in manager", ErrorCode.ALREADY_EXISTS
                )
            fd, mapping = _map(name, key, offset, byte_size)
            self._regions[name] = Region(name, key, offset, byte_size, mapping, fd)

    def unregister(self, name: str = "") -> None:
        """One region (none of that name: nothing to do, as in tritonserver), or all."""
        with self._lock:
            names = [name] if name else list(self._regions)
            closing = [self._regions.pop(n) for n in names if n in self._regions]
        for region in closing:
            region.close()

    def status(self, name: str = "") -> List[Dict[str, Any]]:
        with self._lock:
            if not name:
                return [r.status() for r in self._regions.values()]
            region = self._regions.get(name)
        if region is None:
            raise ServeError(
                f"Unable to find system shared memory region: '{name}'", ErrorCode.NOT_FOUND
            )
        return [region.status()]

    def check(self, place: Place) -> None:
        """The region exists and the range lies inside it (at request time, for outputs)."""
        with self._lock:
            self._locate(place)

    def read(self, place: Place) -> bytes:
        """A copy of the range: the model may keep its inputs past the request."""
        with self._lock:
            region, start, size = self._locate(place)
            return region.mapping[start : start + size]

    def write(self, place: Place, data: bytes, output: str) -> None:
        with self._lock:
            region, start, size = self._locate(place)
            if len(data) > size:
                raise ServeError(
                    f"shared memory size specified with the request for output '{output}' "
                    f"({size} bytes) should be at least {len(data)} bytes to hold the results"
                )
            region.mapping[start : start + len(data)] = data

    def close(self) -> None:
        self.unregister()

    def _locate(self, place: Place) -> Tuple[Region, int, int]:
        name, offset, size = place
        region = self._regions.get(name)
        if region is None:
            raise ServeError(f"Unable to find shared memory region: '{name}'", ErrorCode.NOT_FOUND)
        if size <= 0 or offset < 0 or offset + size > region.byte_size:
            raise ServeError(
                f"Invalid offset + byte size for shared memory region: '{name}'",
                ErrorCode.INVALID_ARG,
            )
        start = region.offset + offset
        if os.fstat(region.fd).st_size < start + size:
            # Touching pages past the object's end would kill this process with SIGBUS.
            raise ServeError(
                f"shared memory region '{name}' (key '{region.key}') is smaller than when it "
                "was registered: register it again after resizing it",
                ErrorCode.INVALID_ARG,
            )
        return region, start, size


def _map(name: str, key: str, offset: int, byte_size: int) -> Tuple[int, mmap.mmap]:
    """The object ``key`` opened and mapped from its start to the region's end."""
    inner = key[1:] if key.startswith("/") else key
    if not inner or "/" in inner:  # shm_open refuses such names too
        raise ServeError(f"Unable to open shared memory region: '{key}'")
    try:
        fd = os.open(os.path.join(SHM_DIR, inner), os.O_RDWR)
    except OSError:
        raise ServeError(f"Unable to open shared memory region: '{key}'") from None
    try:
        end = offset + byte_size
        if offset < 0 or byte_size <= 0 or end > os.fstat(fd).st_size:
            raise ServeError(
                f"failed to register shared memory region '{name}': invalid args",
                ErrorCode.INVALID_ARG,
            )
        return fd, mmap.mmap(fd, end)
    except BaseException:
        os.close(fd)
        raise


def place_of(params: Mapping[str, Any]) -> Optional[Place]:
    """A tensor's place from its parameters (``shared_memory_region``, ``_offset``,
    ``_byte_size``), or None where it has none."""
    region = params.get("shared_memory_region")
    if region is None:
        return None
    offset = int(params.get("shared_memory_offset", 0) or 0)
    return str(region), offset, int(params.get("shared_memory_byte_size", 0) or 0)


def required(regions: Optional[Regions], tensor: str) -> Regions:
    """``regions``, where a tensor names one (a server built without them refuses it)."""
    if regions is None:
        raise ServeError(
            f"shared memory regions are not served here (tensor '{tensor}'): send the data "
            "in the request",
            ErrorCode.UNSUPPORTED,
        )
    return regions
