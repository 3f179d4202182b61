"""What tritonserver does with a model at load, besides calling the backend, done the same way
for the offline engines (ModelHarness, StubModel, and devserve, which runs them): the
configurations it refuses, in its words, and the ``model_warmup`` samples it runs on each
instance before the model is ready (a failing sample fails the load; the warmup requests
count in the statistics). Observed on tritonserver 2.51 with both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, List, Mapping, Tuple

import numpy as np

from ..utils.bytes_codec import deserialize_bytes_tensor
from ..utils.config_rules import load_refusals
from ..utils.dtypes import CONFIG_NAME_TO_CODE, TYPE_BYTES, triton_to_numpy_type
from ..utils.errors import TritonModelException
from .engine import OfflineEngine
from .harness_errors import InferError

Sample = Tuple[str, int, List[Dict[str, np.ndarray]]]  # name, iterations, the batch's inputs


def refuse_like_server(config: Mapping[str, Any], model_name: str) -> None:
    """Raise TritonModelException, with the server's text and the fix, for the first reason
    tritonserver refuses to load ``config`` (the rules `pybackend validate` reports)."""
    refusals = load_refusals(config, model_name)
    if refusals:
        raise TritonModelException(refusals[0].text)


def warmup_samples(config: Mapping[str, Any], model_dir: Path) -> List[Sample]:
    """The ``model_warmup`` samples in config order: each runs ``count`` times (at least
    once) as one execute of ``batch_size`` requests (none when it is left out), each request
    one sample (a batch dimension of 1 where the model batches). ``zero_data`` is zeros
    (empty BYTES elements), ``random_data`` random values (empty elements for BYTES, as the
    server makes them), ``input_data_file`` the raw contents of
    ``<model_dir>/warmup/<file>`` (BYTES: the length-prefixed serialization)."""
    batched = int(config.get("max_batch_size", 0) or 0) > 0
    samples: List[Sample] = []
    for sample in config.get("model_warmup") or []:
        inputs = {
            str(name): _sample_input(spec, batched, model_dir)
            for name, spec in (sample.get("inputs") or {}).items()
        }
        batch = [dict(inputs) for _ in range(int(sample.get("batch_size") or 0))]
        if not batch:
            continue  # batch_size 0 (left out): the server makes no request of it
        samples.append((str(sample.get("name", "")), max(1, int(sample.get("count") or 0)), batch))
    return samples


def _sample_input(spec: Mapping[str, Any], batched: bool, model_dir: Path) -> np.ndarray:
    code = CONFIG_NAME_TO_CODE.get(str(spec.get("data_type", "")), 0)
    shape = ([1] if batched else []) + [int(d) for d in spec.get("dims", []) or []]
    count = int(np.prod(shape)) if shape else 1
    if code == TYPE_BYTES:
        if spec.get("input_data_file"):
            data = (model_dir / "warmup" / str(spec["input_data_file"])).read_bytes()
            return deserialize_bytes_tensor(data)[:count].reshape(shape)
        return np.array([b""] * count, np.object_).reshape(shape)
    numpy_type = triton_to_numpy_type(code)
    if numpy_type is None:
        raise TritonModelException(f"warmup input of data type {spec.get('data_type')!r}")
    dtype = np.dtype(numpy_type)
    if spec.get("input_data_file"):
        data = (model_dir / "warmup" / str(spec["input_data_file"])).read_bytes()
        return np.frombuffer(data, dtype, count).reshape(shape).copy()
    if spec.get("random_data"):
        if dtype == np.bool_:
            return np.random.default_rng().integers(0, 2, shape).astype(np.bool_)
        raw = np.random.default_rng().integers(0, 256, count * dtype.itemsize, np.uint8)
        return raw.view(dtype).reshape(shape)
    return np.zeros(shape, dtype)


def run_warmup(model: OfflineEngine) -> None:
    """Run ``model``'s warmup samples (a started ModelHarness or StubModel) as the server
    runs them on an instance; TritonModelException with the server's text for the first
    sample that fails."""
    for name, iterations, batch in warmup_samples(model.config, model.model_dir):
        for _ in range(iterations):
            errors = _errors(model, batch)
            if errors:
                reasons = "".join(f"{e}; " for e in errors)
                raise TritonModelException(f"failed to run warmup sample '{name}': {reasons}")


def _errors(model: OfflineEngine, batch: List[Dict[str, np.ndarray]]) -> List[str]:
    if not model.decoupled:
        return [r.message for r in model.infer_batch(batch) if isinstance(r, InferError)]
    errors = []
    for inputs in batch:  # a decoupled model answers each through its sender
        try:
            model.infer_stream(inputs)
        except InferError as e:
            errors.append(e.message)
    return errors
