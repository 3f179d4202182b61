"""What the harness hands back for one response: its outputs by name, and the parameters
the model set on it, in every mode alike."""

from __future__ import annotations

import json
from typing import Any, Dict, Iterable, Mapping, Optional, Tuple, Union

import numpy as np

#: A response parameter as a client reads it (KServe v2 allows these three).
Parameter = Union[bool, int, str]

#: Parameters the server adds to a response itself; a client does not count them as the
#: model's (tritonserver's gRPC stream flags its final response with this one).
SERVER_PARAMETERS = frozenset({"triton_final_response"})


class Outputs(Dict[str, np.ndarray]):
    """A response's outputs by name (a plain ``dict`` to compare and index), with the
    parameters the model set on it (``InferenceResponse(parameters=...)``) in
    :attr:`parameters`, as a client of tritonserver reads them."""

    parameters: Dict[str, Parameter]

    def __init__(
        self,
        outputs: Union[Mapping[str, np.ndarray], Iterable[Tuple[str, np.ndarray]]] = (),
        parameters: Optional[Mapping[str, Parameter]] = None,
    ) -> None:
        super().__init__(outputs)
        self.parameters = dict(parameters or {})


def parameters_from_json(text: Optional[str]) -> Dict[str, Parameter]:
    """A response's parameters from the JSON object that the response and the stub's
    protocol carry them in (``None`` or empty: none)."""
    return dict(json.loads(text)) if text else {}


def grpc_parameter(parameter: Any) -> Any:
    """The value an ``InferParameter`` holds (None when it holds none)."""
    which = parameter.WhichOneof("parameter_choice")
    return getattr(parameter, which) if which else None


def parameters_from_grpc(parameters: Mapping[str, Any]) -> Dict[str, Parameter]:
    """A gRPC response's ``InferParameter`` map as plain values, without the server's own."""
    found = {name: grpc_parameter(value) for name, value in parameters.items()}
    return {k: v for k, v in found.items() if k not in SERVER_PARAMETERS and v is not None}


def parameters_of(outputs: Mapping[str, np.ndarray]) -> Dict[str, Parameter]:
    """The response parameters that came with ``outputs`` (none for a plain mapping)."""
    return dict(getattr(outputs, "parameters", None) or {})
