"""Non-ASCII text through the stub's standard output and file names: prints a line and
creates a file named with it in DIR; answers what each did, as JSON."""

import json
import os
import sys

import numpy as np

import triton_python_backend_utils as pb_utils

TEXT = "caf\u00e9 \u4e2d\u6587"


def attempt(what, *args) -> str:
    try:
        what(*args)
        return "ok"
    except Exception as e:  # noqa: BLE001 - the answer says what was raised
        return type(e).__name__


def create(path: str) -> None:
    open(path, "w").close()


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            where = pb_utils.get_input_tensor_by_name(request, "DIR").as_numpy()[0].decode()
            answer = {
                "print": attempt(print, f"text_io says {TEXT}"),
                "open": attempt(create, os.path.join(where, TEXT)),
                "stdout": sys.stdout.encoding,
            }
            out = np.array([json.dumps(answer).encode()], dtype=np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out)]))
        return responses
