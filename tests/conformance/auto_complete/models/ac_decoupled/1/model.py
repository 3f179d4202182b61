import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        auto_complete_model_config.add_input({"name": "IN", "data_type": "TYPE_INT32", "dims": [1]})
        auto_complete_model_config.add_output(
            {"name": "OUT", "data_type": "TYPE_INT32", "dims": [1]}
        )
        auto_complete_model_config.set_model_transaction_policy(dict(decoupled=True))
        return auto_complete_model_config

    def execute(self, requests):
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            sender = request.get_response_sender()
            sender.send(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]),
                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL,
            )
        return None
