import numpy as np

import triton_python_backend_utils as pb_utils


class UnprintableError(Exception):
    def __str__(self):
        raise RuntimeError("cannot print this error")  # LINE:unprintable_str


def out(*values):
    return pb_utils.Tensor("OUT", np.array(values, np.int32))


def msg(text):
    return pb_utils.Tensor("MSG", np.array([text.encode()], dtype=object))


class TritonPythonModel:
    def execute(self, requests):
        request = requests[0]
        mode = pb_utils.get_input_tensor_by_name(request, "MODE").as_numpy()[0].decode()
        if mode == "assert":
            assert mode == "never"  # LINE:assert
        if mode == "key_error":
            raise KeyError()  # LINE:key_error
        if mode == "model_exception_empty":
            raise pb_utils.TritonModelException("")  # LINE:model_exception_empty
        if mode == "unprintable":
            raise UnprintableError("x")  # LINE:unprintable
        if mode == "inputs_cleared":
            request.inputs().clear()
            still = pb_utils.get_input_tensor_by_name(request, "MODE") is not None
            return [pb_utils.InferenceResponse([out(len(request.inputs()), int(still))])]
        if mode == "outputs_cleared":
            response = pb_utils.InferenceResponse([out(3)])
            response.output_tensors().clear()
            return [response]
        if mode == "outputs_appended":
            response = pb_utils.InferenceResponse([out(4)])
            response.output_tensors().append(msg("appended"))
            kept = pb_utils.get_output_tensor_by_name(response, "MSG") is None
            return [pb_utils.InferenceResponse([out(4, int(kept))])] if kept else [response]
        if mode.startswith("release_flags_"):
            request.set_release_flags(int(mode[len("release_flags_") :]))
            return [pb_utils.InferenceResponse([out(7)])]
        if mode == "type_codes":
            kinds = [bool, int, float, bytes, object, np.dtype("S7"), np.float32]
            kinds += [np.dtype(np.bytes_), np.dtype(np.int64)]
            return [
                pb_utils.InferenceResponse(
                    [msg(repr([pb_utils.numpy_to_triton_type(k) for k in kinds]))]
                )
            ]
        raise ValueError(f"unknown mode {mode}")
