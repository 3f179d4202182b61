import logging
import sys

import numpy as np

import triton_python_backend_utils as pb_utils

print("LOG-MARK print at import", flush=True)


def log_every_level(phase):
    logger = pb_utils.Logger
    logger.log_info(f"LOG-MARK {phase} log_info")  # LINE:log_info
    logger.log_warn(f"LOG-MARK {phase} log_warn")  # LINE:log_warn
    logger.log_error(f"LOG-MARK {phase} log_error")  # LINE:log_error
    logger.log_verbose(f"LOG-MARK {phase} log_verbose")  # LINE:log_verbose
    logger.log(f"LOG-MARK {phase} log INFO", logger.INFO)  # LINE:log_INFO
    logger.log(f"LOG-MARK {phase} log WARNING", logger.WARNING)  # LINE:log_WARNING
    logger.log(f"LOG-MARK {phase} log ERROR", logger.ERROR)  # LINE:log_ERROR
    logger.log(f"LOG-MARK {phase} log VERBOSE", logger.VERBOSE)  # LINE:log_VERBOSE
    logger.log(f"LOG-MARK {phase} log default")  # LINE:log_default


class TritonPythonModel:
    @staticmethod
    def auto_complete_config(auto_complete_model_config):
        pb_utils.Logger.log_info("LOG-MARK auto_complete log_info")  # LINE:ac_log_info
        pb_utils.Logger.log_warn("LOG-MARK auto_complete log_warn")  # LINE:ac_log_warn
        return auto_complete_model_config

    def initialize(self, args):
        log_every_level("initialize")

    def execute(self, requests):
        for request in requests:
            mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
            if mode == "levels":
                log_every_level("execute")
            elif mode.startswith("verbose:"):
                pb_utils.Logger.log_verbose(f"LOG-MARK {mode}")
            elif mode.startswith("print:"):
                print(f"LOG-MARK {mode}", flush=True)
            elif mode.startswith("print_unflushed:"):
                print(f"LOG-MARK {mode}")
            elif mode.startswith("stderr:"):
                sys.stderr.write(f"LOG-MARK {mode}\n")
            elif mode.startswith("logging:"):
                logging.getLogger("user.model").warning("LOG-MARK %s", mode)
            elif mode.startswith("alias:"):
                # PyTriton does exactly this: the class must accept attribute assignment.
                pb_utils.Logger.error = pb_utils.Logger.log_error
                pb_utils.Logger.error(f"LOG-MARK {mode}")  # LINE:alias
            elif mode.startswith("info:"):
                pb_utils.Logger.log_info(f"LOG-MARK {mode}")
        out = pb_utils.Tensor("OUT", np.array([1], np.int32))
        return [pb_utils.InferenceResponse([out]) for _ in requests]
