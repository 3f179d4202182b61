import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            args = json.loads(pb_utils.get_input_tensor_by_name(request, "ARGS").as_numpy()[0])
            if isinstance(args.get("files"), dict):
                args["files"] = {k: v.encode() for k, v in args["files"].items()}
            call = {
                "load": pb_utils.load_model,
                "unload": pb_utils.unload_model,
                "ready": pb_utils.is_model_ready,
            }[mode]
            try:
                result = {"returned": call(**args)}
            except Exception as e:
                result = {"raised": f"{type(e).__name__}: {e}"}
            out = np.array([json.dumps(result).encode()], np.object_)
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULT", out)]))
        return responses
