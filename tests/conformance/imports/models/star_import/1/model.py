"""A model that star-imports pb_utils and then uses what the original's module imports for
itself (json, struct, np) without importing them: it runs on the original, whose
triton_python_backend_utils has no __all__. (The original's star import does not give the
classes its stub adds to the module later, Tensor among them: they are used through the
module here.)"""

import triton_python_backend_utils as pb_utils
from triton_python_backend_utils import *  # noqa: F403


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            value = get_input_tensor_by_name(request, "IN").as_numpy()  # noqa: F405
            packed = struct.pack("<i", int(value[0]))  # noqa: F405
            text = json.dumps({"packed": packed.hex()})  # noqa: F405
            out = pb_utils.Tensor("OUT", np.array([text.encode()], dtype=np.object_))  # noqa: F405
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
