"""A BLS pipeline: preprocess -> model -> postprocess, each step a request to another model.

Errors of a step come back as an error response (BLS does not raise); the pipeline passes
them on to its client unchanged.
"""

import triton_python_backend_utils as pb_utils


def call(model, inputs, outputs):
    """Run one step; returns its response (which may carry an error)."""
    request = pb_utils.InferenceRequest(
        model_name=model, inputs=inputs, requested_output_names=outputs
    )
    return request.exec()


class TritonPythonModel:
    def execute(self, requests):
        return [self.run(request) for request in requests]

    def run(self, request):
        text = pb_utils.get_input_tensor_by_name(request, "TEXT")
        weights = pb_utils.get_input_tensor_by_name(request, "WEIGHTS")

        pre = call("bls_preprocess", [text], ["FEATURES"])
        if pre.has_error():
            return pb_utils.InferenceResponse(error=pre.error())
        features = pb_utils.get_output_tensor_by_name(pre, "FEATURES").as_numpy()

        scored = call(
            "add_sub",
            [pb_utils.Tensor("INPUT0", features), pb_utils.Tensor("INPUT1", weights.as_numpy())],
            ["OUTPUT0"],
        )
        if scored.has_error():
            return pb_utils.InferenceResponse(error=scored.error())
        scores = pb_utils.get_output_tensor_by_name(scored, "OUTPUT0").as_numpy()

        post = call("bls_postprocess", [pb_utils.Tensor("SCORES", scores)], ["LABEL"])
        if post.has_error():
            return pb_utils.InferenceResponse(error=post.error())
        label = pb_utils.get_output_tensor_by_name(post, "LABEL")
        return pb_utils.InferenceResponse(
            [pb_utils.Tensor("LABEL", label.as_numpy()), pb_utils.Tensor("SCORES", scores)]
        )
