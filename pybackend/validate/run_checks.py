"""`pybackend validate --run`: the model loaded through the offline harness as the server
loads it (``auto_complete_config``, ``initialize``), then one generated request; outputs
whose data type or shape differ from the configuration are warnings, since tritonserver
passes them on as the model made them (issue 19). The configuration auto_complete_config
made is handed back, for the config checks to run on it."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, Dict, Iterator, List, Mapping, Optional, Tuple

import numpy as np

from ..stub.returns import OutputRules
from ..stub.tracebacks import format_exception
from ..testing.harness import ModelHarness
from ..testing.harness_bounds import ExecuteStillRunningWarning
from ..testing.harness_errors import NoFinal, NoResponse
from ..testing.outputs import array_mismatches
from ..utils.dtypes import triton_string_to_numpy
from ..utils.errors import TritonModelException
from .findings import ERROR, NOTE, WARNING, ModelReport

#: How long a model may take to load (auto_complete_config and initialize) and to answer
#: the request (a decoupled model: until its FINAL), before it is given up on.
LOAD_TIMEOUT_S = 120.0
REQUEST_TIMEOUT_S = 30.0


#: Where the models' progress is written (set by `pybackend validate --run`, which runs
#: this in a child process, to name the model whose code ended that process).
PROGRESS_ENV = "PYBACKEND_VALIDATE_PROGRESS"


def _progress(report: ModelReport, what: str) -> None:
    path = os.environ.get(PROGRESS_ENV)
    if path:
        Path(path).write_text(f"model '{report.name}' ({report.path}) while {what}")


class _Abandoned(Exception):
    """The model's code did not return in time; its thread is left behind (a daemon)."""


def _bounded(step: Callable[[], Any], seconds: float) -> Any:
    """``step()``'s result or exception, from a thread of its own; _Abandoned when it
    does not end within ``seconds`` (model code cannot be interrupted, only left)."""
    outcome: Dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["result"] = step()
        except BaseException as e:  # noqa: BLE001 - handed to the caller as it is
            outcome["error"] = e

    thread = threading.Thread(target=run, name="validate-run", daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        raise _Abandoned()
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("result")


class Runner:
    """The models of one `validate --run`: all loaded first, then one request each, so
    that a model's BLS calls reach the others of the repository as in the server."""

    def __init__(self) -> None:
        self.loaded: List[Tuple[ModelReport, str, ModelHarness]] = []
        self.abandoned: List[ModelHarness] = []

    def __call__(
        self, report: ModelReport, config: Dict[str, Any], model_file: Path
    ) -> Optional[Dict[str, Any]]:
        """Load the model (auto_complete_config, initialize); the completed config."""
        file = report.file_of(model_file)
        # Outside the model's directory: a python-based backend's model.py, which runs the
        # version the server serves first (the highest).
        runtime = None if model_file.is_relative_to(report.path) else model_file.parent
        harness = ModelHarness(
            report.path,
            version=None if runtime else int(model_file.parent.name),
            model_file=model_file.name,
            # This bounds the whole load itself (the import too), and says so past it.
            initialize_timeout=LOAD_TIMEOUT_S + 10,
            runtime=runtime,
        )
        _progress(report, "loading (auto_complete_config, initialize)")
        with _noted(report, file):
            try:
                _bounded(harness.start, LOAD_TIMEOUT_S)
            except _Abandoned:
                text = f"loading the model did not end within {LOAD_TIMEOUT_S:g} s (abandoned)"
                report.add(ERROR, "load", text, file)
                return None
            except TritonModelException as e:  # auto_complete_config's, in the server's words
                report.add(ERROR, "load", f"loading the model fails: {e}", file)
                return None
            except Exception as e:  # noqa: BLE001 - the model's import or initialize: anything
                report.add(ERROR, "load", f"loading the model fails: {format_exception(e)}", file)
                return None
        self.loaded.append((report, file, harness))
        return harness.config

    def request_all(self) -> None:
        for report, file, harness in self.loaded:
            _progress(report, "executing the generated request")
            with _noted(report, file):
                # Findings go to a report of their own until the request is done: an
                # abandoned thread may still add some, and they must not show.
                found = ModelReport(report.name, report.path)
                try:
                    # The harness bounds the request (REQUEST_TIMEOUT_S): this is a few
                    # seconds more, in case the harness itself does not return.
                    bound = REQUEST_TIMEOUT_S + 5
                    request = functools.partial(_request, found, file, harness, REQUEST_TIMEOUT_S)
                    _bounded(request, bound)
                    report.findings += found.findings
                except _Abandoned:
                    self.abandoned.append(harness)
                    report.add(
                        WARNING,
                        "run",
                        f"the generated request got no answer within {REQUEST_TIMEOUT_S:g} s "
                        "(abandoned): does execute wait for something that never comes?",
                        file,
                    )

    def close(self) -> None:
        for _, _, harness in reversed(self.loaded):
            if harness not in self.abandoned:  # its execute still runs: finalize would wait
                harness.close()
        self.loaded = []


@contextlib.contextmanager
def _noted(report: ModelReport, file: str) -> Iterator[None]:
    """Python warnings raised meanwhile (by the model's code) become notes."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, ExecuteStillRunningWarning):
            continue  # an abandoned request: reported as the warning that says so
        text = f"a warning while the model ran: {w.category.__name__}: {w.message}"
        report.add(NOTE, "run", text, file)


def _request(report: ModelReport, file: str, harness: ModelHarness, timeout: float) -> None:
    try:
        inputs = generated_inputs(harness.config)
        if inputs is None:
            report.add(
                NOTE, "run", "no request sent: an input's data type cannot be generated", file
            )
            return
        request = harness.request(inputs, **sequence_of_one(harness.config))
        if harness.decoupled:
            responses = harness.stream(request, timeout)
        else:
            responses = harness.execute([request], timeout)
    except NoResponse:  # execute did not return: the harness left it running
        raise _Abandoned() from None
    except NoFinal as e:  # a client of the server would wait as long as it waits
        if harness.execute_still_running is not None:  # execute itself did not return
            raise _Abandoned() from None
        text = (
            f"{e.message}: execute returned, but the request's response sender never sent "
            "its last response (flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)"
        )
        report.add(WARNING, "run", text, file)
        return
    except Exception as e:  # noqa: BLE001 - the model's code again
        report.add(NOTE, "run", f"the generated request failed: {format_exception(e)}", file)
        return
    for response in responses:
        if response is None:
            continue
        error = response.error()
        if error is not None:
            report.add(
                NOTE,
                "run",
                "the generated request (ones, every -1 dimension 1) got an error response, "
                f"which may be the model's answer to such data: {error.message()}",
                file,
            )
            continue
        arrays = {t.name(): t.as_numpy() for t in response.output_tensors()}
        for text in output_mismatches(harness.config, harness.instance_name, arrays):
            report.add(WARNING, "output", text, file)


def sequence_of_one(config: Mapping[str, Any]) -> Dict[str, Any]:
    """The generated request's sequence fields: a model behind the sequence batcher gets it
    as a sequence of one request (the server refuses one without a correlation id)."""
    if config.get("sequence_batching") is None:
        return {}
    return {"sequence_id": 1, "sequence_start": True, "sequence_end": True}


def generated_inputs(config: Mapping[str, Any]) -> Optional[Dict[str, np.ndarray]]:
    """Ones of each required input's data type, every -1 dimension 1, with a batch of 1
    where the model batches; None where a data type has no numpy counterpart here."""
    batched = int(config.get("max_batch_size") or 0) > 0
    inputs = {}
    for spec in config.get("input") or []:
        if spec.get("optional"):
            continue
        try:
            dtype = triton_string_to_numpy(str(spec.get("data_type")))
        except KeyError:  # TYPE_BF16: numpy has no such type
            return None
        shape = ([1] if batched else []) + [
            1 if int(d) == -1 else int(d) for d in spec.get("dims") or []
        ]
        if dtype is np.object_:
            inputs[spec["name"]] = np.full(shape, b"1", dtype=np.object_)
        else:
            inputs[spec["name"]] = np.ones(shape, dtype=dtype)
    return inputs


def output_mismatches(
    config: Mapping[str, Any], instance: str, outputs: Mapping[str, np.ndarray]
) -> List[str]:
    """The outputs whose data type or shape differ from the configuration, by the rules the
    stub applies under PYBACKEND_STRICT_OUTPUTS (stub/returns.py OutputRules), each with
    what tritonserver does with it by default."""
    rules = OutputRules(config, instance, strict=False)
    return [
        f"{m.text} (tritonserver passes it on as it is; "
        f'PYBACKEND_STRICT_OUTPUTS: "true" makes it an error)'
        for m in array_mismatches(rules, outputs)
    ]
