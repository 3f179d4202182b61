import triton_python_backend_utils as pb_utils

# One long line at the end of initialize and of finalize: the server writes it escaped, which
# takes longer than the rest of the load, so a load that did not wait for the stub's log
# messages would complete before it is in the log.
LONG = "x" * (4 << 20)


class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info(f"LOG-BURST initialize {LONG}")

    def execute(self, requests):
        responses = []
        for request in requests:
            data = pb_utils.get_input_tensor_by_name(request, "IN").as_numpy()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", data)]))
        return responses

    def finalize(self):
        pb_utils.Logger.log_info(f"LOG-BURST finalize {LONG}")
