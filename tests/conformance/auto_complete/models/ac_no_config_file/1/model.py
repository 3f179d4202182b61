import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        inputs = [
            {"name": "IN0", "data_type": "TYPE_FP32", "dims": [4]},
            {"name": "IN1", "data_type": "TYPE_INT32", "dims": [-1], "optional": True},
        ]
        outputs = [{"name": "OUT0", "data_type": "TYPE_FP32", "dims": [4]}]
        config = auto_complete_model_config.as_dict()
        input_names = [i["name"] for i in config["input"]]
        output_names = [o["name"] for o in config["output"]]
        for item in inputs:
            if item["name"] not in input_names:
                auto_complete_model_config.add_input(item)
        for item in outputs:
            if item["name"] not in output_names:
                auto_complete_model_config.add_output(item)
        auto_complete_model_config.set_max_batch_size(8)
        auto_complete_model_config.set_dynamic_batching()
        return auto_complete_model_config

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN0").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT0", data * 2)]))
        return responses
