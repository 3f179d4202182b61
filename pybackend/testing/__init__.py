"""The offline harness: run and test a ``model.py`` in-process with the real pb_utils types,
in a real stub process, or through a real tritonserver (docs/testing.md)."""

from ..stub.returns import STRICT_PARAMETER, OutputMismatch
from .config import ConfigError, load_config, parse_config
from .harness import ModelHarness
from .harness_bounds import ExecuteStillRunningWarning
from .harness_errors import InferError, NoFinal, NoResponse, TimedOut
from .outputs import OutputMismatchWarning
from .results import Outputs
from .server_model import ServerModel
from .stub_model import StubModel
from .transport import LogRecord, MetricRecord, harness_transport

__all__ = [
    "ConfigError",
    "ExecuteStillRunningWarning",
    "InferError",
    "LogRecord",
    "MetricRecord",
    "ModelHarness",
    "NoFinal",
    "NoResponse",
    "OutputMismatch",
    "OutputMismatchWarning",
    "Outputs",
    "STRICT_PARAMETER",
    "ServerModel",
    "StubModel",
    "TimedOut",
    "harness_transport",
    "load_config",
    "parse_config",
]
