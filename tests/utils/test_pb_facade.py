"""The drop-in module exposes every public name of spec §3.1/§3.2."""

# ruff: noqa: E501 - exact upstream messages stay on one line so they can be grepped for

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import triton_python_backend_utils as pb_utils

NAMES = """
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START TRITONSERVER_REQUEST_FLAG_SEQUENCE_END
TRITONSERVER_RESPONSE_COMPLETE_FINAL TRITONSERVER_REQUEST_RELEASE_ALL
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE TRITON_STRING_TO_NUMPY serialize_byte_tensor
deserialize_bytes_tensor get_input_tensor_by_name get_output_tensor_by_name
get_input_config_by_name get_output_config_by_name using_decoupled_model_transaction_policy
triton_to_numpy_type numpy_to_triton_type triton_string_to_numpy ModelConfig TritonError
TritonModelException Tensor InferenceRequest InferenceResponse Logger PreferredMemory
TRITONSERVER_MEMORY_GPU TRITONSERVER_MEMORY_CPU MetricFamily load_model unload_model
is_model_ready get_model_dir
""".split()


def test_every_name_is_exported() -> None:
    missing = [n for n in NAMES if not hasattr(pb_utils, n)]
    assert not missing
    assert set(NAMES) <= set(pb_utils.__all__)


def test_constants() -> None:
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_START == 1
    assert pb_utils.TRITONSERVER_REQUEST_FLAG_SEQUENCE_END == 2
    assert pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_ALL == 1
    assert pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE == 2
    assert pb_utils.MetricFamily.COUNTER == 0 and pb_utils.MetricFamily.HISTOGRAM == 2


def test_same_classes_as_the_package() -> None:
    from pybackend import utils

    assert pb_utils.Tensor is utils.Tensor and pb_utils.ModelConfig is utils.ModelConfig


def test_import_does_not_pull_in_the_stub() -> None:
    code = "import sys, triton_python_backend_utils; print(any(m.startswith('pybackend.stub') for m in sys.modules))"
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
    )
    assert out.stdout.strip() == "False", out.stderr


def test_get_model_dir_default() -> None:
    assert pb_utils.get_model_dir() == ""
