import numpy as np

import triton_python_backend_utils as pb_utils


def stream_request():
    return pb_utils.InferenceRequest(
        model_name="bls_stream",
        inputs=[
            pb_utils.Tensor("COUNT", np.array([1], np.int32)),
            pb_utils.Tensor("DELAY_MS", np.array([0], np.int32)),
        ],
        requested_output_names=["OUT"],
    )


class TritonPythonModel:
    def execute(self, requests):
        return [
            pb_utils.InferenceResponse(
                [
                    pb_utils.Tensor(
                        "OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
                    )
                ]
            )
            for r in requests
        ]

    def finalize(self):
        try:
            stream_request().exec(decoupled=True)
        except Exception as e:  # noqa: BLE001 - its type and text are what is checked
            pb_utils.Logger.log_info(f"bls_finalize_caller: {type(e).__name__}: {e}")
        # qa python_models/bls_finalize_error, as written there: the exception leaves finalize.
        print("Cleaning up...")
        stream_request().exec(decoupled=True)
