import triton_python_backend_utils as pb_utils

VALUE = 41
UTILS = pb_utils
