"""Non-ASCII text a model prints or uses as a file name, with the server's locale unset (a
container's usual C locale). The original's stub runs its interpreter with ASCII standard
streams and file system encoding, whatever the locale (C.UTF-8 too, probed 2026-11-30): the
print and the open raise UnicodeEncodeError. Ours uses UTF-8 for both (CPython's UTF-8 mode
under the C locale), and the line reaches the server log as written."""

from __future__ import annotations

import json

import pytest

from conformance_support.clients import bytes_input, infer, text_output

TEXT = "caf\u00e9 \u4e2d\u6587"
NO_LOCALE = {"LC_ALL": "", "LANG": "", "LC_CTYPE": ""}


@pytest.fixture(scope="module")
def server(feature_repository):
    start = feature_repository.start(
        model_control_mode="explicit", load_models=["text_io"], env=NO_LOCALE
    )
    with start as server:
        yield server


def answer(server, where) -> dict:
    result = infer(server, "http", "text_io", {"DIR": bytes_input(str(where))})
    return json.loads(text_output(result, "OUT"))


@pytest.mark.deviation(
    "the original's stub has ASCII standard streams and file names: printing or opening "
    "non-ASCII text raises UnicodeEncodeError in the model"
)
def test_non_ascii_text_is_printed_to_the_log_and_names_files(server, tmp_path):
    assert answer(server, tmp_path) == {"print": "ok", "open": "ok", "stdout": "utf-8"}
    assert (tmp_path / TEXT).exists()
    assert f"text_io says {TEXT}" in server.log_text()


@pytest.mark.deviation("pins the original's ASCII streams", backend="original")
def test_the_original_refuses_non_ascii_text(server, tmp_path):
    got = answer(server, tmp_path)
    assert got["print"] == got["open"] == "UnicodeEncodeError"
    assert got["stdout"] == "ascii"
