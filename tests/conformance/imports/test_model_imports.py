"""How model.py is imported (spec 2.1 step 3, 10.1): module "<version>.model", relative
imports of siblings, the model directory on sys.path, get_model_dir(), an empty command
line, the working directory searched at each import."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output

ONE = {"IN": np.array([1], np.int32)}


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit",
        load_models=["imp_rel", "imp_custom_file", "imp_argv", "imp_chdir"],
    )
    with start as srv:
        yield srv


def info(server, protocol, model):
    return json.loads(text_output(infer(server, protocol, model, ONE), "INFO"))


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_module_name_and_file(server, feature_repository, protocol):
    seen = info(server, protocol, "imp_rel")
    version_dir = feature_repository.model_dir("imp_rel") / "1"
    assert seen["name"] == "1.model"
    assert seen["package"] == "1"
    assert seen["file"] == str(version_dir / "model.py")


def test_get_model_dir_is_the_version_directory(server, feature_repository):
    seen = info(server, "http", "imp_rel")
    assert seen["model_dir"] == str(feature_repository.model_dir("imp_rel") / "1")


def test_relative_imports_of_siblings(server):
    seen = info(server, "http", "imp_rel")
    assert seen["sibling"] == "1.sibling"
    assert seen["deep"] == "1.pkg.deep"
    assert seen["values"] == [41, 42, "model directory"]


def test_helpers_share_the_one_pb_utils_module(server):
    assert info(server, "http", "imp_rel")["same_utils"] is True


def test_version_and_model_directories_are_on_sys_path(server):
    seen = info(server, "http", "imp_rel")
    assert seen["version_dir_on_path"] >= 0
    assert seen["model_dir_on_path"] >= 0
    # Appended in this order: <repo>/<model>/<version>, then <repo>/<model>.
    assert seen["version_dir_on_path"] < seen["model_dir_on_path"]


def test_default_model_filename(server, feature_repository):
    seen = info(server, "grpc", "imp_custom_file")
    version_dir = feature_repository.model_dir("imp_custom_file") / "1"
    assert seen == {
        "name": "1.entry_point",
        "file": str(version_dir / "entry_point.py"),
        "model_dir": str(version_dir),
    }


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_command_line_is_empty(server, protocol):
    """The original's stub is an embedded interpreter: sys.argv is [''], so a model that
    parses the command line (argparse at import) gets its defaults and loads."""
    seen = info(server, protocol, "imp_argv")
    assert seen == {"scale": 2.0, "import": [""], "initialize": [""], "execute": [""]}


def test_a_module_in_the_directory_changed_to_is_imported(server):
    """The original's interpreter has '' first on sys.path, the working directory at each
    import: a model that changes directory and imports from there finds the module. Ours had
    the server's working directory's path there (python -m) and raised ImportError."""
    assert info(server, "http", "imp_chdir") == {"found": "found in the new working directory"}
