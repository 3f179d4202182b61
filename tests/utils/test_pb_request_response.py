"""InferenceRequest (incoming and BLS construction) and InferenceResponse."""

from __future__ import annotations

import asyncio
import json

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
from pybackend.utils import transport
from pybackend.utils.request import InferenceRequest


def incoming(**kw) -> InferenceRequest:
    args = dict(
        token=1,
        request_id="r1",
        correlation_id=5,
        inputs=[pb_utils.Tensor("IN", np.zeros(2))],
        requested_output_names=["A", "B"],
        flags=1,
        timeout=10,
        parameters='{"p": 1}',
        decoupled=False,
    )
    args.update(kw)
    return InferenceRequest._incoming(**args)


def test_incoming_accessors() -> None:
    r = incoming()
    assert r.request_id() == "r1"
    assert r.correlation_id() == 5
    assert incoming(correlation_id="s").correlation_id() == "s"
    assert r.flags() == pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START
    r.set_flags(2)
    assert r.flags() == 2
    assert r.timeout() == 10
    assert json.loads(r.parameters()) == {"p": 1}
    assert r.requested_output_names() == {"A", "B"}
    assert isinstance(r.requested_output_names(), set)
    assert [t.name() for t in r.inputs()] == ["IN"]
    assert pb_utils.get_input_tensor_by_name(r, "IN") is r.inputs()[0]
    assert pb_utils.get_input_tensor_by_name(r, "nope") is None
    assert r.get_response_sender() is r.get_response_sender()
    assert r.trace().get_context() is None
    assert r.is_cancelled() is False
    assert incoming(parameters="").parameters() == "{}"


def test_release_flags_are_positional() -> None:
    r = incoming()
    r.set_release_flags(pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE)
    assert r.release_flags() == 2
    with pytest.raises(TypeError):
        r.set_release_flags(flags=1)  # type: ignore[call-arg]
    # Any uint32, as the original's binding takes it (only exactly 2 reschedules).
    for flags in (0, 5, 7, 2**32 - 1):
        r.set_release_flags(flags)
        assert r.release_flags() == flags
    with pytest.raises(TypeError):
        r.set_release_flags(2**32)
    with pytest.raises(TypeError):
        r.set_release_flags(-1)


def test_bls_constructor_validation() -> None:
    t = pb_utils.Tensor("IN", np.zeros(1))
    r = pb_utils.InferenceRequest(
        model_name="m",
        inputs=[t],
        requested_output_names=["OUT"],
        correlation_id="c",
        parameters={"a": 1, "b": True, "c": "x"},
        timeout=5,
        preferred_memory=pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_CPU, 0),
    )
    assert r.model_name() == "m" and r.requested_output_names() == {"OUT"}
    assert json.loads(r.parameters()) == {"a": 1, "b": True, "c": "x"}
    with pytest.raises(TypeError, match="model_name"):
        pb_utils.InferenceRequest(inputs=[t], requested_output_names=[])
    with pytest.raises(
        pb_utils.TritonModelException, match="^Correlation ID must be integer or string$"
    ):
        pb_utils.InferenceRequest(
            model_name="m", inputs=[], requested_output_names=[], correlation_id=1.5
        )
    with pytest.raises(
        pb_utils.TritonModelException, match="Expect parameters keys to have type str"
    ):
        pb_utils.InferenceRequest(
            model_name="m", inputs=[], requested_output_names=[], parameters={1: 2}
        )
    with pytest.raises(
        pb_utils.TritonModelException,
        match="Expect parameters values to have type bool/int/str, found type <class 'float'>",
    ):
        pb_utils.InferenceRequest(
            model_name="m", inputs=[], requested_output_names=[], parameters={"f": 1.5}
        )
    with pytest.raises(
        pb_utils.TritonModelException,
        match="^Input tensor for request with id 'q' and model name 'm' should not be empty.$",
    ):
        pb_utils.InferenceRequest(
            request_id="q", model_name="m", inputs=[None], requested_output_names=[]
        )
    with pytest.raises(pb_utils.TritonModelException, match="Requested output name"):
        pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[""])


def test_bls_exec_outside_a_stub_is_unsupported() -> None:
    """Without a stub (plain import) there is no server to send BLS requests to."""
    r = pb_utils.InferenceRequest(model_name="m", inputs=[], requested_output_names=[])
    with pytest.raises(pb_utils.TritonModelException, match="not supported"):
        r.exec()
    with pytest.raises(RuntimeError):
        r.async_exec()  # no running loop

    async def main() -> None:
        with pytest.raises(pb_utils.TritonModelException, match="not supported"):
            await r.async_exec()

    asyncio.run(main())


def test_response() -> None:
    t = pb_utils.Tensor("OUT", np.ones(2))
    r = pb_utils.InferenceResponse([t], parameters={"x": 1})
    assert r.output_tensors() == [t] and not r.has_error() and r.error() is None
    assert json.loads(r.parameters()) == {"x": 1}
    assert pb_utils.get_output_tensor_by_name(r, "OUT") is t
    assert pb_utils.get_output_tensor_by_name(r, "X") is None
    assert pb_utils.InferenceResponse().output_tensors() == []
    assert pb_utils.InferenceResponse().parameters() == "{}"
    e = pb_utils.InferenceResponse(
        error=pb_utils.TritonError("bad", pb_utils.TritonError.INVALID_ARG)
    )
    assert e.has_error() and e.error().message() == "bad"
    with pytest.raises(
        pb_utils.TritonModelException,
        match="^Output tensor for inference response should not be empty.$",
    ):
        pb_utils.InferenceResponse([None])
    with pytest.raises(TypeError):
        pb_utils.InferenceResponse(error="not a TritonError")
    with pytest.raises(pb_utils.TritonModelException, match="values"):
        pb_utils.InferenceResponse(parameters={"f": 0.5})


def test_unsupported_features_raise_clear_errors() -> None:
    with pytest.raises(pb_utils.TritonModelException, match="MetricFamily"):
        pb_utils.MetricFamily("m", "d", pb_utils.MetricFamily.COUNTER)
    with pytest.raises(pb_utils.TritonModelException, match="load_model"):
        pb_utils.load_model("m")
    with pytest.raises(pb_utils.TritonModelException, match="files should be a dictionary"):
        pb_utils.load_model("m", config="{}", files=[1])
    with pytest.raises(pb_utils.TritonModelException, match="unload_model"):
        pb_utils.unload_model("m")
    with pytest.raises(pb_utils.TritonModelException, match="is_model_ready"):
        pb_utils.is_model_ready("m")


def test_preferred_memory() -> None:
    assert pb_utils.TRITONSERVER_MEMORY_GPU == 0 and pb_utils.TRITONSERVER_MEMORY_CPU == 1
    p = pb_utils.PreferredMemory(pb_utils.TRITONSERVER_MEMORY_GPU, 1)
    assert p.preferred_memory_type == 0 and p.preferred_device_id == 1
    with pytest.raises(TypeError):
        pb_utils.PreferredMemory(5)


def test_transport_is_swappable() -> None:
    class Cancelled(transport.Transport):
        def is_cancelled(self, request):
            return True

    previous = transport.set_transport(Cancelled())
    try:
        assert incoming().is_cancelled() is True
        assert incoming().get_response_sender().is_cancelled() is True
    finally:
        transport.set_transport(previous)
