"""pb_utils' public surface as a model meets it (models/pb_surface), held to the ORIGINAL's:
every public name of the module, of each class it exports and of the objects a model
handles (request, sender, tensor, responses, errors, metrics, logger, trace, BLS request),
run in both backends side by side, each with its kind (class, routine, module, data).

Ours may have more names (its extensions, docs/compatibility.md); it may not lack one. And
``from triton_python_backend_utils import *`` gives a model what it gives on the original,
whose module has no ``__all__``: json, struct and np included (models/star_import)."""

from __future__ import annotations

import json
from typing import Any, Dict

import numpy as np
import pytest

from conformance_support.backend import selected_backend
from conformance_support.clients import PROTOCOLS, infer, text_output
from conformance_support.launcher import BASE_ENV
from conformance_support.streaming import stream_once

MODELS = ["pb_surface", "star_import"]
Surface = Dict[str, Dict[str, str]]


@pytest.fixture(scope="module")
def server(feature_repository):
    with feature_repository.start(model_control_mode="explicit", load_models=MODELS) as srv:
        yield srv


def read_surface(server: Any) -> Surface:
    events = stream_once(server, "pb_surface", {"IN": np.array([1], np.int32)})
    answers = [e for e in events if "SURFACE" in e.outputs]
    assert len(answers) == 1, events
    surface: Surface = json.loads(answers[0].value("SURFACE"))
    return surface


@pytest.fixture(scope="module")
def original_surface(server, feature_repository) -> Surface:
    if selected_backend() == "original":
        return read_surface(server)
    from pybackend.server import TritonServer, original_venv

    try:
        original_venv()
    except FileNotFoundError as e:
        pytest.skip(f"the original backend is not installed here: {e}")
    with TritonServer(
        feature_repository.path,
        backend="original",
        env=dict(BASE_ENV),
        model_control_mode="explicit",
        load_models=["pb_surface"],
    ) as original:
        return read_surface(original)


# Names of the original that ours leaves out on purpose, and why.
OMITTED = {
    "c module.async_event_future_done_callback": (
        "the original stub's own callback for the futures of its event loop (async execute); "
        "model code never calls it, and ours runs coroutines without it"
    ),
}


def missing_names(original: Surface, this: Surface) -> list[str]:
    missing = []
    for section, names in sorted(original.items()):
        ours = this.get(section)
        if ours is None:
            missing.append(f"{section}: the whole section")
            continue
        for name, kind in sorted(names.items()):
            if ours.get(name) != kind and f"{section}.{name}" not in OMITTED:
                missing.append(f"{section}.{name}: original {kind}, this {ours.get(name)}")
    return missing


def test_the_surface_is_read(original_surface: Surface) -> None:
    assert set(original_surface) >= {"module", "class Tensor", "object request", "object sender"}
    assert original_surface["module"]["Tensor"] == "class"
    assert original_surface["object request"]["get_response_sender"] == "routine"
    assert original_surface["module"]["np"] == "module"


def test_no_public_name_of_the_original_is_missing(server, original_surface: Surface) -> None:
    missing = missing_names(original_surface, read_surface(server))
    assert not missing, f"{len(missing)} names differ:\n" + "\n".join(missing)


def test_omissions_are_current(original_surface: Surface) -> None:
    for entry in OMITTED:
        section, name = entry.split(".", 1)
        assert name in original_surface.get(section, {}), f"{entry} is no longer the original's"


def test_the_comparison_sees_a_difference(original_surface: Surface) -> None:
    fewer = {section: dict(names) for section, names in original_surface.items()}
    del fewer["object sender"]["is_cancelled"]
    fewer["module"]["Tensor"] = "routine"
    assert missing_names(original_surface, fewer) == [
        "module.Tensor: original class, this routine",
        "object sender.is_cancelled: original routine, this None",
    ]


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_a_star_import_gives_what_the_original_module_imports(server, protocol: str) -> None:
    result = infer(server, protocol, "star_import", {"IN": np.array([7], np.int32)})
    assert json.loads(text_output(result, "OUT")) == {"packed": "07000000"}
