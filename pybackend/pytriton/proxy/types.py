"""What an inference callable receives (``pytriton.proxy.types``): one :class:`Request` per
Triton request, a mapping of input name -> numpy array with the request's parameters and
the outputs the client asked for. Added to PyTriton's fields: ``is_cancelled()`` and the
sequence attributes (``sequence_id``, ``sequence_start``, ``sequence_end``)."""

from __future__ import annotations

import dataclasses
from typing import (
    Any,
    Callable,
    Dict,
    ItemsView,
    Iterator,
    KeysView,
    List,
    Optional,
    Union,
    ValuesView,
)

import numpy as np


@dataclasses.dataclass
class Request:
    data: Dict[str, np.ndarray]
    parameters: Optional[Dict[str, Union[str, int, bool]]] = None
    span: Optional[Any] = None
    requested_output_names: Optional[List[str]] = None
    #: The correlation id of the request's sequence (0 or "" outside a sequence); set for
    #: models with ``ModelConfig(sequence_batcher=...)``.
    sequence_id: Union[int, str] = 0
    #: The request opens (START flag) / closes (END flag) its sequence.
    sequence_start: bool = False
    sequence_end: bool = False
    # Asks the server whether the client cancelled the request (None: never cancelled,
    # e.g. a Request a test or a warmup builds itself).
    _cancelled: Optional[Callable[[], bool]] = dataclasses.field(
        default=None, repr=False, compare=False
    )

    def is_cancelled(self) -> bool:
        """True once the client cancelled this request or went away (a gRPC call or stream
        cancelled or closed; tritonserver 2.51 does not cancel on an HTTP disconnect): the
        callable may stop its work early."""
        return self._cancelled is not None and bool(self._cancelled())

    def __getitem__(self, input_name: str) -> np.ndarray:
        return self.data[input_name]

    def __setitem__(self, input_name: str, input_data: np.ndarray) -> None:
        self.data[input_name] = input_data

    def __delitem__(self, input_name: str) -> None:
        del self.data[input_name]

    def __len__(self) -> int:
        return len(self.data)

    def __iter__(self) -> Iterator[str]:
        return iter(self.data)

    def items(self) -> ItemsView[str, np.ndarray]:
        return self.data.items()

    def keys(self) -> KeysView[str]:
        return self.data.keys()

    def values(self) -> ValuesView[np.ndarray]:
        return self.data.values()


Requests = List[Request]
Response = Dict[str, np.ndarray]
Responses = List[Response]
