import json

import numpy as np

import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        replies = []
        for request in requests:
            n = pb_utils.get_input_tensor_by_name(request, "N")
            call = pb_utils.InferenceRequest(
                model_name="stream_big", inputs=[n], requested_output_names=["OUT"]
            )
            kept, errors = [], []
            for response in call.exec(decoupled=True):
                if response.has_error():
                    errors.append(response.error().message())
                    continue
                out = pb_utils.get_output_tensor_by_name(response, "OUT")
                if out is not None:
                    kept.append(out.as_numpy())  # held until the stream ends
            report = json.dumps({"kept": len(kept), "errors": errors})
            tensor = pb_utils.Tensor("REPORT", np.array([report.encode()], np.object_))
            replies.append(pb_utils.InferenceResponse([tensor]))
        return replies
