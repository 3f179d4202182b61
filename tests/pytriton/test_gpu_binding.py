"""``Tensor(..., device="cuda")`` on the CPU: the configuration a GPU binding generates, the
checks at bind, the conversion of the stub's tensors (a stand-in array library only where a
GPU is truly needed), and DLPack outputs through the real tritonserver (a CPU DLPack
tensor takes the same path a torch/cupy CUDA tensor does). The GPU runs are
tests/gpu/test_gpu_pytriton.py."""

from __future__ import annotations

import sys
import types
from typing import Any, Dict, List

import numpy as np
import pytest

from integration_support.pytriton_helpers import urls
from pybackend.pytriton import _gpu
from pybackend.pytriton._config import config_pbtxt, model_config_dict
from pybackend.pytriton.client import ModelClient
from pybackend.pytriton.exceptions import PyTritonBadParameterError
from pybackend.pytriton.model_config import ModelConfig, Tensor
from pybackend.pytriton.triton import Triton
from pybackend.utils.tensor import Tensor as PbTensor

GPU_IN = Tensor(name="IN", dtype=np.float32, shape=(-1,), device="cuda")
CPU_OUT = Tensor(name="OUT", dtype=np.float32, shape=(-1,))


def test_a_gpu_input_makes_a_gpu_model_that_keeps_gpu_inputs() -> None:
    config = model_config_dict("G", [GPU_IN], [CPU_OUT], ModelConfig(), 2, "/tmp/s")
    assert config["instanceGroup"] == [{"count": 2, "kind": "KIND_GPU"}]
    assert config["parameters"]["FORCE_CPU_ONLY_INPUT_TENSORS"] == {"stringValue": "no"}
    text = config_pbtxt(config)  # Triton's schema takes it
    assert "KIND_GPU" in text and "FORCE_CPU_ONLY_INPUT_TENSORS" in text


def test_a_gpu_output_alone_makes_a_gpu_model() -> None:
    out = Tensor(name="OUT", dtype=np.float32, shape=(-1,), device="cuda")
    config = model_config_dict("G", [CPU_OUT], [out], ModelConfig(), 1, "/tmp/s")
    assert config["instanceGroup"][0]["kind"] == "KIND_GPU"
    assert "FORCE_CPU_ONLY_INPUT_TENSORS" not in config["parameters"]


def test_numpy_stays_the_default() -> None:
    config = model_config_dict("C", [CPU_OUT], [CPU_OUT], ModelConfig(), 1, "/tmp/s")
    assert config["instanceGroup"][0]["kind"] == "KIND_CPU"
    assert list(config["parameters"]) == ["PYBACKEND_ATTACH_SOCKET"]
    # Positional construction as in PyTriton still works; device defaults to "cpu".
    assert Tensor((1,), np.float32, "x", True).device == "cpu"


@pytest.mark.parametrize(
    "tensor,text",
    [
        (Tensor(name="s", dtype=bytes, shape=(1,), device="cuda"), "host memory only"),
        (Tensor(name="t", dtype=np.float32, shape=(1,), device="gpu"), "use one of cpu, cuda"),
    ],
    ids=["strings", "unknown-device"],
)
def test_bad_devices_are_refused_at_bind(triton: Triton, tensor: Tensor, text: str) -> None:
    with pytest.raises(PyTritonBadParameterError, match=text):
        triton.bind("Bad", lambda r: r, inputs=[tensor], outputs=[CPU_OUT])


def test_a_gpu_input_without_torch_or_cupy_is_refused_at_bind(
    triton: Triton, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_gpu, "framework", lambda: None)
    with pytest.raises(PyTritonBadParameterError, match="install torch or cupy"):
        triton.bind("NoTorch", lambda r: r, inputs=[GPU_IN], outputs=[CPU_OUT])


class _FakeTorch(types.ModuleType):
    """Records what GpuInputs asks of torch: the GPU-only calls, answered on the CPU."""

    def __init__(self) -> None:
        super().__init__("torch")
        self.calls: List[Any] = []

    def from_numpy(self, array: np.ndarray) -> Any:
        calls = self.calls

        class _Host:
            def to(self, device: str) -> Any:
                calls.append(("to", device, array.tolist()))
                return ("on", device)

        return _Host()

    def from_dlpack(self, obj: Any) -> Any:
        self.calls.append(("from_dlpack", obj))
        return ("view", obj)


def test_host_inputs_are_copied_to_the_instance_device(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    gpu = _gpu.GpuInputs("torch", device_id=1)
    host = PbTensor("IN", np.array([1.0, 2.0], np.float32))
    assert gpu.convert(host) == ("on", "cuda:1")
    assert fake.calls == [("to", "cuda:1", [1.0, 2.0])]


def test_device_inputs_are_wrapped_not_copied(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakeTorch()
    monkeypatch.setitem(sys.modules, "torch", fake)
    gpu = _gpu.GpuInputs("torch", device_id=0)

    class _OnGpu:  # the stub's tensor of a GPU input: is_cpu() False
        def is_cpu(self) -> bool:
            return False

    tensor = _OnGpu()
    assert gpu.convert(tensor) == ("view", tensor)  # type: ignore[arg-type]
    assert fake.calls == [("from_dlpack", tensor)]


class _DLPackOnly:
    """A non-numpy array that only speaks DLPack, as torch/cupy tensors do."""

    def __init__(self, array: np.ndarray) -> None:
        self._array = array

    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any:
        return self._array.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self) -> Any:
        return self._array.__dlpack_device__()


def test_dlpack_outputs_go_through_the_server(triton: Triton) -> None:
    def plus_one(requests: List[Any]) -> List[Dict[str, Any]]:
        return [{"OUT": _DLPackOnly(r["IN"] + 1)} for r in requests]

    triton.bind(
        "DLPackOut",
        plus_one,
        inputs=[Tensor(name="IN", dtype=np.float32, shape=(-1,))],
        outputs=[CPU_OUT],
        config=ModelConfig(max_batch_size=4),
    )
    triton.run()
    with ModelClient(urls(triton)[0], "DLPackOut") as client:
        y = client.infer_sample(np.array([1.0, 2.0], np.float32))["OUT"]
    np.testing.assert_array_equal(y, np.array([2.0, 3.0], np.float32))
    assert _gpu.is_device_array(_DLPackOnly(np.zeros(1))) is True
    assert _gpu.is_device_array(np.zeros(1)) is False
