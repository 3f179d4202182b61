"""Answers with the public surface of pb_utils as this backend gives it to a model: every
public name of the module and of each class it exports, and of the objects a model meets
(a request, its sender, a tensor, responses, errors, metrics, the logger, a trace, a BLS
request), each as a coarse kind: class, routine, module or data."""

import inspect
import json

import numpy as np

import triton_python_backend_utils as pb_utils


def kind(value):
    if inspect.isclass(value):
        return "class"
    if inspect.ismodule(value):
        return "module"
    if callable(value):
        return "routine"
    return "data"


def surface(obj):
    # What an exception inherits from BaseException depends on the Python running the stub
    # (add_note since 3.11), not on the backend: left out.
    is_error = isinstance(obj, BaseException) or (
        inspect.isclass(obj) and issubclass(obj, BaseException)
    )
    inherited = set(dir(BaseException)) if is_error else set()
    names = {}
    for name in dir(obj):
        if name.startswith("_") or name in inherited:
            continue
        try:
            names[name] = kind(getattr(obj, name))
        except Exception as e:  # a property that needs state the object lacks
            names[name] = "raises " + type(e).__name__
    return names


class TritonPythonModel:
    def execute(self, requests):
        import c_python_backend_utils  # the original's C++ module, which some models import

        table = {"module": surface(pb_utils), "c module": surface(c_python_backend_utils)}
        for name, value in surface(pb_utils).items():
            if value == "class":
                table["class " + name] = surface(getattr(pb_utils, name))
        request = requests[0]
        sender = request.get_response_sender()
        tensor = pb_utils.Tensor("SURFACE", np.array([b"x"], dtype=np.object_))
        family = pb_utils.MetricFamily(
            name="pb_surface_family", description="d", kind=pb_utils.MetricFamily.COUNTER
        )
        objects = {
            "request": request,
            "input": request.inputs()[0],
            "sender": sender,
            "trace": request.trace(),
            "tensor": tensor,
            "response": pb_utils.InferenceResponse(output_tensors=[tensor]),
            "error": pb_utils.TritonError("m"),
            "family": family,
            "metric": family.Metric(labels={"a": "b"}),
            "bls request": pb_utils.InferenceRequest(
                model_name="x", requested_output_names=["SURFACE"], inputs=[tensor]
            ),
        }
        for label, obj in objects.items():
            table["object " + label] = surface(obj)
        answer = np.array([json.dumps(table, sort_keys=True).encode()], dtype=np.object_)
        sender.send(
            pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("SURFACE", answer)]),
            flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
        )
        return None
