"""Several instances of one model in stub processes, under the model's
PYBACKEND_INSTANCE_PROCESS (docs/instances.md, docs/testing.md), as the backend runs them:
``own``, a stub process per instance; ``shared``, one host process (``python -m
pybackend.stub.host --mode shared``) serving every instance on a thread of its own;
``fork``, a host that imports model.py once and forks a child per instance. Each instance is
a :class:`StubModel` of its own (its channels, ``initialize`` args, senders), the first
one the model the test opened; the model's statistics and metrics are shared.
"""

from __future__ import annotations

from typing import Any, List, Optional

from .harness_instances import instance_names, instance_process_of, start_together
from .stub_host import StubHost


class StubInstances:
    """The instances of a :class:`StubModel` (its first) beyond the first, and the host
    process they share (None under ``own``)."""

    def __init__(self, first: Any, count: int, mode: Optional[str]) -> None:
        self.first = first
        self.count = count
        self.requested_mode = mode
        self.mode = mode or "own"
        self.others: List[Any] = []
        self.host: Optional[StubHost] = None
        self.is_other = False  # one of another model's others: that one prepared it

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

    def start_others(self) -> None:
        """The other instances, started all at once; a failing ``initialize`` fails the start
        (the others that started are closed)."""
        first = self.first
        names = instance_names(first.config, self.count, first.model_name)
        for name in [n for n in names if n != first.instance_name][: self.count - 1]:
            other = type(first)(
                first.model_dir,
                version=first.version,
                config=first.config,
                model_name=first.model_name,
                instance_name=name,
                model_file=first.model_file.name,
                auto_complete=False,
                bls=first._fakes,  # each instance's BLS calls reach the same fakes
                env=first._env,
                python=first._python if first._python_given else None,
                execute_timeout=first.execute_timeout,
                metric_store=first.metric_store,
            )
            other.statistics = first.statistics  # the server's statistics are the model's
            other.output = first.output if self.host is not None else other.output
            other._instances.is_other = True
            other._instances.mode = self.mode
            other._instances.host = self.host
            self.others.append(other)
        error = start_together(self.others)
        if error is not None:
            self.close_others()
            raise error

    def close_others(self) -> None:
        others, self.others = self.others, []
        for other in others:
            other.close()

    def close_host(self) -> None:
        if self.host is not None and not self.is_other:
            host, self.host = self.host, None
            host.close()

    @property
    def all(self) -> List[Any]:
        return [self.first, *self.others]
