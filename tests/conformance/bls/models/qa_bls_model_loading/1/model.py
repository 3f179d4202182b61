import json
import time

import numpy as np

import triton_python_backend_utils as pb_utils

TARGET = "qa_load_target"
OVERRIDE = "qa_load_override"
IO = '"input": [{"name": "INPUT0", "data_type": "TYPE_FP32", "dims": [-1]}], '
IO += '"output": [{"name": "OUTPUT0", "data_type": "TYPE_FP32", "dims": [-1]}]'
ONLY_V2 = '{"backend": "python", ' + IO + ', "version_policy": {"specific": {"versions": [2]}}}'
PLAIN = '{"backend": "python", ' + IO + "}"
BROKEN = '"parameters": {"config": {{"backend":"python", "version_policy":{"specific":{}}}}}'
MODEL_PY = b"""
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        arrays = [pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy() for r in requests]
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", a)]) for a in arrays]
"""


def ready(name, version=""):
    try:
        return pb_utils.is_model_ready(model_name=name, model_version=version)
    except pb_utils.TritonModelException as exc:
        # What qa accepts for a model the server does not know.
        if f"Request for unknown model: '{name}' is not found" not in str(exc):
            raise
        return False


def unloaded(name):
    pb_utils.unload_model(name)
    # unload_model returns before the model is gone: wait for it (bounded).
    deadline = time.monotonic() + 60
    while ready(name) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not ready(name)


class TritonPythonModel:
    def initialize(self, args):
        self.problems = []
        for check in (self.load_unload, self.config_override, self.file_override):
            try:
                check()
            except Exception as exc:  # a check that raises is a problem, not a failed load
                self.problems.append(f"{check.__name__}: {type(exc).__name__}: {exc}")
            for name in (TARGET, OVERRIDE):
                if ready(name) and not unloaded(name):
                    self.problems.append(f"{check.__name__}: {name} did not unload")

    def expect(self, what, value):
        if not value:
            self.problems.append(what)

    def load_unload(self):
        self.expect("not ready before the load", not ready(TARGET))
        pb_utils.load_model(model_name=TARGET)
        self.expect("ready after the load", ready(TARGET))
        self.expect("gone after the unload", unloaded(TARGET))

    def config_override(self):
        pb_utils.load_model(TARGET)
        try:
            pb_utils.load_model(model_name=TARGET, config=BROKEN)
            self.problems.append("a broken config override loaded")
        except pb_utils.TritonModelException:
            pass
        for version in ("2", "3"):
            self.expect(f"v{version} ready after the failed override", ready(TARGET, version))
        pb_utils.load_model(TARGET, config=ONLY_V2)
        self.expect("v2 ready after the override", ready(TARGET, "2"))
        self.expect("v3 gone after the override", not ready(TARGET, "3"))

    def file_override(self):
        pb_utils.load_model(TARGET)
        files = {"file:1/model.py": MODEL_PY}
        try:
            pb_utils.load_model(TARGET, "", files)
            self.problems.append("files without a config loaded")
        except pb_utils.TritonModelException:
            pass
        pb_utils.load_model(model_name=OVERRIDE, config=PLAIN, files=files)
        self.expect("target v1 not ready", not ready(TARGET, "1"))
        self.expect("target v3 still ready", ready(TARGET, "3"))
        self.expect("override v1 ready", ready(OVERRIDE, "1"))
        self.expect("override has no v3", not ready(OVERRIDE, "3"))
        pb_utils.load_model(TARGET, PLAIN, files)
        self.expect("target v1 ready after its file override", ready(TARGET, "1"))
        self.expect("target v3 gone after its file override", not ready(TARGET, "3"))
        self.expect("override v1 still ready", ready(OVERRIDE, "1"))

    def execute(self, requests):
        report = np.array([json.dumps(self.problems).encode()], dtype=np.object_)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", report)]) for _ in requests]
