import triton_python_backend_utils as pb_utils


def log_each_kind(phase):
    logger = pb_utils.Logger
    logger.log(f"QA-LOG {phase}-Specific Msg!", logger.INFO)
    logger.log_info(f"QA-LOG {phase}-Info Msg!")
    logger.log_warn(f"QA-LOG {phase}-Warning Msg!")
    logger.log_error(f"QA-LOG {phase}-Error Msg!")
    logger.log_verbose(f"QA-LOG {phase}-Verbose Msg!")


class TritonPythonModel:
    def initialize(self, args):
        log_each_kind("Initialize")

    def execute(self, requests):
        log_each_kind("Execute")
        responses = []
        for request in requests:
            tensor = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(
                pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", tensor.as_numpy())])
            )
        log_each_kind("Execute")
        return responses

    def finalize(self):
        log_each_kind("Finalize")
