# ruff: noqa: E501 - the exact texts stay whole, one finding a line, so they can be grepped
"""Broken models, one per check of `pybackend validate`, with the exact finding each must
get and, for what tritonserver refuses at load, the words of its refusal (observed on
tritonserver 2.51 with our backend; test_validate.py holds validate to both)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import List, Optional, Tuple

OK_PY = """import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([]) for _ in requests]
"""
IO = """input [ { name: "X", data_type: TYPE_FP32, dims: [ 4 ] } ]
output [ { name: "Y", data_type: TYPE_FP32, dims: [ 4 ] } ]
"""


def param(key: str, value: str) -> str:
    return f'parameters {{ key: "{key}" value {{ string_value: "{value}" }} }}\n'


# (severity, check, message, file, line); {dir} stands for the model directory.
Expected = Tuple[str, str, str, str, int]


@dataclass
class Case:
    config: str  # after the header (line 1)
    expected: List[Expected]
    model_py: Optional[str] = OK_PY  # None: no model.py
    version: bool = True  # a version directory 1/
    server: str = ""  # what tritonserver's refusal says ("" : it loads the model)
    env_dir: bool = False  # an env/ directory without bin/python3
    notes: List[str] = field(default_factory=list)
    header: str = 'backend: "python"\n'  # config.pbtxt's first line


CASES = {
    "syntax": Case(
        "foo: 1\n",
        [("error", "config-syntax", 'failed to read text proto: Message type "inference.ModelConfig" has no field named "foo".', "config.pbtxt", 2)],
        server="failed to read text proto",
    ),
    "wrong_name": Case(
        'name: "other"\n' + IO,
        [("error", "model-name", "unexpected directory name 'wrong_name' for model 'other', directory name must equal model name", "config.pbtxt", 2)],
        server="unexpected directory name 'wrong_name' for model 'other', directory name must equal model name",
    ),
    "no_version": Case(
        IO,
        [("error", "version", "at least one version must be available under the version policy of model 'no_version' (a version is a numbered directory holding model.py, e.g. 1/)", "", 0)],
        version=False,
        server="at least one version must be available under the version policy of model 'no_version'",
    ),
    "neg_batch": Case(
        "max_batch_size: -1\n" + IO,
        [("error", "max-batch-size", "'max_batch_size' must be non-negative value (it is -1)", "config.pbtxt", 2)],
        server="'max_batch_size' must be non-negative value",
    ),
    "empty_name": Case(
        'input [ { name: "", data_type: TYPE_FP32, dims: [ 4 ] } ]\n',
        [("error", "tensor-name", "model input must specify 'name'", "config.pbtxt", 2)],
        server="model input must specify 'name'",
    ),
    "no_dtype": Case(
        'input [ { name: "X", dims: [ 4 ] } ]\n',
        [("error", "data-type", "model input 'X' must specify 'data_type'", "config.pbtxt", 2)],
        server="model input 'X' must specify 'data_type'",
    ),
    "out_no_dtype": Case(
        'output [ { name: "Y", dims: [ 4 ] } ]\n',
        [("error", "data-type", "model output 'Y' must specify 'data_type'", "config.pbtxt", 2)],
        server="model output 'Y' must specify 'data_type'",
    ),
    "no_dims": Case(
        'max_batch_size: 4\ninput [ { name: "X", data_type: TYPE_FP32 } ]\n',
        [("error", "dims", "model input 'X' must specify 'dims'", "config.pbtxt", 3)],
        server="model input 'X' must specify 'dims'",
    ),
    "bad_dims": Case(
        'output [ { name: "Y", data_type: TYPE_FP32, dims: [ 2, 0 ] } ]\n',
        [("error", "dims", "model output 'Y' dimension must be integer >= 1, or -1 to indicate a variable-size dimension (dims: [2, 0])", "config.pbtxt", 2)],
        server="model output 'Y' dimension must be integer >= 1, or -1 to indicate a variable-size dimension",
    ),
    "reshape_bad": Case(
        'input [ { name: "X", data_type: TYPE_FP32, dims: [ 3 ], reshape: { shape: [ 2, 2 ] } } ]\n',
        [("error", "reshape", "model input 'X' has different size for dims and reshape (dims [3]: 3 elements, reshape [2, 2]: 4)", "config.pbtxt", 2)],
        server="model input 'X' has different size for dims and reshape",
    ),
    "pref_zero": Case(
        "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 0 ] }\n" + IO,
        [("error", "preferred-batch-size", "dynamic batching preferred size must be positive (it is 0)", "config.pbtxt", 3)],
        server="dynamic batching preferred size must be positive",
    ),
    "pref_gt_max": Case(
        "max_batch_size: 8\ndynamic_batching { preferred_batch_size: [ 4, 16 ] }\n" + IO,
        [("error", "preferred-batch-size", "dynamic batching preferred size must be <= max batch size (16 > max_batch_size 8)", "config.pbtxt", 3)],
        server="dynamic batching preferred size must be <= max batch size",
    ),
    "cpu_gpus": Case(
        "instance_group [ { kind: KIND_CPU, count: 1, gpus: [ 0 ] } ]\n" + IO,
        [("error", "instance-group", "instance group cpu_gpus_0 of model cpu_gpus has kind KIND_CPU but specifies one or more GPUs", "config.pbtxt", 2)],
        server="instance group cpu_gpus_0 of model cpu_gpus has kind KIND_CPU but specifies one or more GPUs",
    ),
    "kind_gpu": Case(
        "instance_group [ { kind: KIND_GPU, count: 1 } ]\n" + IO,
        [("warning", "instance-group", "instance group kind_gpu_0 has kind KIND_GPU: where the server has no GPU, tritonserver refuses the model (instance group kind_gpu_0 of model kind_gpu has kind KIND_GPU but no GPUs are available)", "config.pbtxt", 2)],
        # This machine has no GPU: the server refuses it here.
        server="instance group kind_gpu_0 of model kind_gpu has kind KIND_GPU but no GPUs are available",
    ),
    "dup_input": Case(
        'input [\n  { name: "X", data_type: TYPE_FP32, dims: [ 4 ] },\n  { name: "X", data_type: TYPE_INT32, dims: [ 4 ] }\n]\n',
        [("warning", "duplicate-tensor", "model input 'X' is declared more than once: tritonserver loads the model, but only one declaration can describe the tensor; keep one", "config.pbtxt", 4)],
    ),
    "platform_python": Case(
        'platform: "python"\n' + IO,
        [("error", "platform", 'unexpected platform type \'python\' for platform_python (a Python model names no platform: write backend: "python" instead)', "config.pbtxt", 1)],
        header="",
        server="unexpected platform type 'python' for platform_python",
    ),
    "ordered_priorities": Case(
        "max_batch_size: 4\ndynamic_batching {\n  preserve_ordering: true\n  priority_levels: 2\n  default_priority_level: 1\n}\n" + IO,
        [("error", "dynamic-batching", "Only one priority level is allowed when 'preserve_ordering' is true for ordered_priorities (drop priority_levels, or preserve_ordering)", "config.pbtxt", 4)],
        server="Only one priority level is allowed when 'preserve_ordering' is true for ordered_priorities",
    ),
    "force_cpu_bad": Case(
        param("FORCE_CPU_ONLY_INPUT_TENSORS", "maybe") + IO,
        [("error", "parameter", "Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: maybe' (use yes or no)", "config.pbtxt", 2)],
        server="Incorrect value for FORCE_CPU_ONLY_INPUT_TENSORS: maybe'",
    ),
    "thread_budget_bad": Case(
        param("THREAD_BUDGET", "lots") + IO,
        [("error", "parameter", "model 'thread_budget_bad': parameter THREAD_BUDGET must be \"auto\", \"off\" or a positive number of threads per instance, got 'lots'", "config.pbtxt", 2)],
        server="model 'thread_budget_bad': parameter THREAD_BUDGET must be \"auto\", \"off\" or a positive number of threads per instance, got 'lots'",
    ),
    "debug_bad": Case(
        param("PYBACKEND_DEBUG", "gdb") + IO,
        [("error", "parameter", "PYBACKEND_DEBUG='gdb' (model 'debug_bad') is not a debug mode: use pdb, debugpy[:[HOST:]PORT] or debugpy-wait[:[HOST:]PORT].", "config.pbtxt", 2)],
        server="is not a debug mode: use pdb, debugpy[:[HOST:]PORT] or debugpy-wait[:[HOST:]PORT].",
    ),
    "debug_two": Case(
        param("PYBACKEND_DEBUG", "pdb") + "instance_group [ { kind: KIND_CPU, count: 2 } ]\n" + IO,
        [
            ("error", "parameter", "model 'debug_two': PYBACKEND_DEBUG=pdb debugs one instance, and the configuration has 2: set instance_group [ { count: 1 } ] while debugging", "config.pbtxt", 2),
            ("warning", "parameter", "model 'debug_two': debug mode (PYBACKEND_DEBUG=pdb): no stub or execute timeouts, so a stub stopped at a breakpoint is not restarted. Not for production.", "config.pbtxt", 2),
        ],
        server="model 'debug_two': PYBACKEND_DEBUG=pdb debugs one instance, and the configuration has 2: set instance_group [ { count: 1 } ] while debugging",
    ),
    "async_conc_bad": Case(
        param("PYBACKEND_ASYNC_EXECUTE_CONCURRENCY", "0") + IO,
        [("error", "parameter", "model config parameter PYBACKEND_ASYNC_EXECUTE_CONCURRENCY must be an integer >= 1 (how many batches one instance runs in `async def execute` at once), found '0'", "config.pbtxt", 2)],
        server="model config parameter PYBACKEND_ASYNC_EXECUTE_CONCURRENCY must be an integer >= 1 (how many batches one instance runs in `async def execute` at once), found '0'",
    ),
    "async_cancel_bad": Case(
        param("PYBACKEND_ASYNC_EXECUTE_CANCEL", "maybe") + IO,
        [("error", "parameter", "model config parameter PYBACKEND_ASYNC_EXECUTE_CANCEL must be true or false, found 'maybe'", "config.pbtxt", 2)],
        server="model config parameter PYBACKEND_ASYNC_EXECUTE_CANCEL must be true or false, found 'maybe'",
    ),
    "strict_outputs_bad": Case(
        param("PYBACKEND_STRICT_OUTPUTS", "maybe") + IO,
        [("error", "parameter", "model config parameter PYBACKEND_STRICT_OUTPUTS must be true or false, found 'maybe'", "config.pbtxt", 2)],
        server="model config parameter PYBACKEND_STRICT_OUTPUTS must be true or false, found 'maybe'",
    ),
    "instance_process_bad": Case(
        param("PYBACKEND_INSTANCE_PROCESS", "threads") + IO,
        [("error", "parameter", "model 'instance_process_bad': incorrect value for PYBACKEND_INSTANCE_PROCESS: 'threads' (expected \"own\" (one process per instance, the default), \"shared\" (one process, one thread per instance) or \"fork\" (model.py imported once, one forked process per instance); docs/instances.md)", "config.pbtxt", 2)],
        server="model 'instance_process_bad': incorrect value for PYBACKEND_INSTANCE_PROCESS: 'threads' (expected \"own\"",
    ),
    "instance_process_isolated": Case(
        param("PYBACKEND_INSTANCE_PROCESS", "shared") + param("ISOLATE_GPU", "yes") + IO,
        [("error", "parameter", "model 'instance_process_isolated': ISOLATE_GPU gives each instance a process that sees only its own device, and PYBACKEND_INSTANCE_PROCESS=shared puts the instances in one process: choose one of the two", "config.pbtxt", 2)],
        server="model 'instance_process_isolated': ISOLATE_GPU gives each instance a process that sees only its own device, and PYBACKEND_INSTANCE_PROCESS=shared puts the instances in one process: choose one of the two",
    ),
    "unknown_param": Case(
        param("PYBACKEND_DEBUGGER", "pdb") + IO,
        [("warning", "parameter", "parameter PYBACKEND_DEBUGGER is not one pybackend reads (PYBACKEND_ASYNC_EXECUTE_CANCEL, PYBACKEND_ASYNC_EXECUTE_CONCURRENCY, PYBACKEND_DEBUG, PYBACKEND_INSTANCE_PROCESS, PYBACKEND_STRICT_OUTPUTS)", "config.pbtxt", 2)],
    ),
    "env_missing": Case(
        param("EXECUTION_ENV_PATH", "$$TRITON_MODEL_DIRECTORY/env.tar.gz") + IO,
        [("error", "parameter", "model 'env_missing': EXECUTION_ENV_PATH '{dir}/env.tar.gz' does not exist. Point it at a Python environment: a directory with bin/python3 (a venv or conda prefix) or a conda-pack archive.", "config.pbtxt", 2)],
        server="EXECUTION_ENV_PATH '{dir}/env.tar.gz' does not exist. Point it at a Python environment",
    ),
    "env_no_python": Case(
        param("EXECUTION_ENV_PATH", "env") + IO,
        [("error", "parameter", "model 'env_no_python': EXECUTION_ENV_PATH '{dir}/env' has no bin/python3: it is not a Python environment. Use a venv (python3 -m venv), a conda prefix or a conda-pack archive of one.", "config.pbtxt", 2)],
        env_dir=True,
        server="EXECUTION_ENV_PATH '{dir}/env' has no bin/python3: it is not a Python environment.",
    ),
    "no_model_py": Case(
        IO,
        [("error", "model-file", "Python model file not found in '{dir}/1/model.py'", "1/model.py", 0)],
        model_py=None,
        server="Python model file not found in '{dir}/1/model.py'",
    ),
    # A TensorFlow platform names the model file even for backend python: model.py is not run.
    "tf_platform_file": Case(
        'platform: "tensorflow_savedmodel"\n' + IO,
        [("error", "model-file", "Python model file not found in '{dir}/1/model.savedmodel'", "1/model.savedmodel", 0)],
        server="Python model file not found in '{dir}/1/model.savedmodel'",
    ),
    "shape_tensor": Case(
        'input [ { name: "X", data_type: TYPE_INT32, dims: [ 4 ], is_shape_tensor: true } ]\n',
        [("error", "shape-tensor", "shape tensors are only supported for TensorRT platform for shape_tensor (drop is_shape_tensor: a Python model's tensors are ordinary tensors)", "config.pbtxt", 2)],
        server="shape tensors are only supported for TensorRT platform for shape_tensor",
    ),
    "ensemble_python": Case(
        'platform: "ensemble"\n' + IO,
        [("error", "platform", "Ensemble model 'ensemble_python' must have platform type 'ensemble' and empty backend type (an ensemble names no backend; a Python model names no platform: write backend: \"python\" alone)", "config.pbtxt", 1)],
        server="Ensemble model 'ensemble_python' must have platform type 'ensemble' and empty backend type",
    ),
    "syntax_error": Case(
        IO,
        [("error", "syntax", "SyntaxError: invalid syntax", "1/model.py", 1)],
        model_py="def broken(:\n    pass\n",
        server="SyntaxError: invalid syntax",
    ),
    "no_class": Case(
        IO,
        [("error", "model-class", "Python model '{dir}/1/model.py' does not define class 'TritonPythonModel'.", "1/model.py", 0)],
        model_py="import triton_python_backend_utils as pb_utils\n",
        server="Python model '{dir}/1/model.py' does not define class 'TritonPythonModel'.",
    ),
    "no_execute": Case(
        IO,
        [("error", "execute", "Python model {dir}/1/model.py does not implement `execute` method. (tritonserver loads the model, then every request fails with this)", "1/model.py", 1)],
        model_py="class TritonPythonModel:\n    def initialize(self, args):\n        pass\n",
    ),
    "import_error": Case(
        IO,
        [("error", "import", "ModuleNotFoundError: No module named 'not_a_module_xyz' (install it in the environment the server runs the model in, or set EXECUTION_ENV_PATH)", "1/model.py", 2)],
        model_py="import json\nfrom not_a_module_xyz.sub import thing\n" + OK_PY,
        server="ModuleNotFoundError: No module named 'not_a_module_xyz'",
    ),
    "names": Case(
        IO,
        [
            ("error", "tensor-name", "get_input_tensor_by_name(..., 'INPUT0'): the configuration declares no input 'INPUT0' (it declares 'X'), so this returns None", "1/model.py", 10),
            ("error", "tensor-name", "get_output_config_by_name(..., 'X'): the configuration declares no output 'X' (it declares 'Y'), so this returns None", "1/model.py", 6),
            ("warning", "tensor-name", "the response holds output 'OUT', which the configuration does not declare (it declares 'Y'): no client can ask for it", "1/model.py", 13),
        ],
        model_py="""import json
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        self.y = pb_utils.get_output_config_by_name(json.loads(args["model_config"]), "X")

    def execute(self, requests):
        for request in requests:
            x = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            y = pb_utils.get_input_tensor_by_name(request, "X")
            yield pb_utils.InferenceResponse(
                output_tensors=[pb_utils.Tensor("Y", y.as_numpy()), pb_utils.Tensor("OUT", x)]
            )
""",
    ),
    "idle_hook": Case(
        IO,
        [("warning", "sequence-idle", "TritonPythonModel.sequence_idle is never called: pybackend calls it for a sequence the sequence batcher ended for being idle, and the configuration has no sequence_batching", "1/model.py", 8)],
        model_py=OK_PY + """
    def sequence_idle(self, correlation_id):
        pass
""",
    ),
    "idle_hook_sequences": Case(
        "sequence_batching { }\n" + IO,
        [],
        model_py=OK_PY + """
    def sequence_idle(self, correlation_id):
        pass
""",
    ),
    "idle_hook_iterative": Case(
        "sequence_batching { iterative_sequence: true }\n" + IO,
        [("warning", "sequence-idle", "TritonPythonModel.sequence_idle is never called: pybackend calls it for a sequence the sequence batcher ended for being idle, and its sequence_batching is an iterative sequence, one request that never idles", "1/model.py", 8)],
        model_py=OK_PY + """
    async def sequence_idle(self, correlation_id):
        pass
""",
    ),
}  # fmt: skip


def make(repo: Path, name: str, case: Case) -> Path:
    d = repo / name
    d.mkdir(parents=True)
    (d / "config.pbtxt").write_text(case.header + case.config)
    if case.version:
        (d / "1").mkdir()
        if case.model_py is not None:
            (d / "1" / "model.py").write_text(case.model_py)
    if case.env_dir:
        (d / "env").mkdir()
    return d
