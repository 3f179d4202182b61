import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        in0 = pb_utils.get_input_tensor_by_name(request, "INPUT0").as_numpy()
        in1 = pb_utils.get_input_tensor_by_name(request, "INPUT1").as_numpy()
        response = pb_utils.InferenceResponse(
            [pb_utils.Tensor("OUTPUT0", in0 + in1), pb_utils.Tensor("OUTPUT1", in0 - in1)]
        )
        sender = request.get_response_sender()
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        # Raises: the sender is closed. The error has no request left to go to.
        sender.send(response)
