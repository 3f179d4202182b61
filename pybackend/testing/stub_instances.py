"""Several instances of one model in stub processes, under the model's
PYBACKEND_INSTANCE_PROCESS (docs/instances.md, docs/testing.md), as the backend runs them:
``own``, a stub process per instance; ``shared``, one host process (``python -m
pybackend.stub.host --mode shared``) serving every instance on a thread of its own;
``fork``, a host that imports model.py once and forks a child per instance. Each instance is
a :class:`StubModel` of its own (its channels, ``initialize`` args, senders), the first
one the model the test opened; the model's statistics and metrics are shared.
"""

from __future__ import annotations

from typing import Any, Optional

from .harness_instances import InstanceSet, instance_names, instance_process_of
from .stub_host import StubHost


class StubInstances(InstanceSet):
    """The instances of a :class:`StubModel` (its first) beyond the first, and the host
    process they share (None under ``own``)."""

    def __init__(self, first: Any, count: int, mode: Optional[str]) -> None:
        super().__init__(first, count, mode)
        self.host: Optional[StubHost] = None

    def prepare(self) -> None:
        """Before the first instance starts (its config completed): the mode, and the host."""
        if self.is_other:
            return
        first = self.first
        config = first.config
        if self.requested_mode is not None:
            params = dict(config.get("parameters") or {})
            params["PYBACKEND_INSTANCE_PROCESS"] = {"string_value": self.requested_mode}
            config = {**config, "parameters": params}
        self.mode = instance_process_of(config, first.model_name)
        instance_names(first.config, self.count, first.model_name)  # refuses a bad count early
        if self.mode != "own":
            self.host = StubHost(
                first.model_name,
                self.mode,
                first._env,
                first._python,
                first._unset,
                first.output,
            )

    def _make_other(self, name: str) -> Any:
        first = self.first
        other = type(first)(
            first.model_dir,
            version=first.version,
            config=first.config,
            model_name=first.model_name,
            instance_name=name,
            model_file=first.model_file.name,
            auto_complete=False,
            runtime=first.runtime_dir,
            bls=first._fakes,  # each instance's BLS calls reach the same fakes
            env=first._env,
            python=first._python if first._python_given else None,
            execute_timeout=first.execute_timeout,
            initialize_timeout=first.initialize_timeout,
            metric_store=first.metric_store,
        )
        other.output = first.output if self.host is not None else other.output
        other._instances.host = self.host
        return other

    def close_host(self) -> None:
        if self.host is not None and not self.is_other:
            host, self.host = self.host, None
            host.close()
