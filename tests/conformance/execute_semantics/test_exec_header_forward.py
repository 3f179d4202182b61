"""Header forwarding (tritonserver's ``--http-header-forward-pattern`` and
``--grpc-header-forward-pattern``, user-needs server#3972, #5391, #8790): the headers of an
inference call whose names match the pattern reach the model as request parameters, next to
the parameters the client sent; other headers do not. tritonserver adds them to the request
before any backend sees it, so both backends must show the same ``parameters()`` text."""

from __future__ import annotations

import json

import numpy as np
import pytest

from conformance_support.clients import PROTOCOLS, infer, text_output

PATTERN = "^x-fwd-.*"
ONE = {"IN": np.array([1], np.int32)}


@pytest.fixture(scope="module")
def server(feature_repository):
    args = [f"--http-header-forward-pattern={PATTERN}", f"--grpc-header-forward-pattern={PATTERN}"]
    with feature_repository.start(
        model_control_mode="explicit", load_models=["request_echo"], extra_args=args
    ) as srv:
        yield srv


def parameters(server, protocol, **kwargs):
    result = infer(server, protocol, "request_echo", ONE, ["INFO"], **kwargs)
    return json.loads(json.loads(text_output(result, "INFO"))["parameters"])


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_matching_headers_become_parameters(server, protocol):
    headers = {"x-fwd-tenant": "acme", "x-fwd-trace": "t-17", "x-other": "dropped"}
    got = parameters(server, protocol, headers=headers)
    assert got == {"x-fwd-tenant": "acme", "x-fwd-trace": "t-17"}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_forwarded_headers_join_the_clients_parameters(server, protocol):
    got = parameters(
        server, protocol, headers={"x-fwd-tenant": "acme"}, parameters={"temperature": 7}
    )
    assert got == {"x-fwd-tenant": "acme", "temperature": 7}


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_no_matching_header_leaves_no_parameter(server, protocol):
    assert parameters(server, protocol, headers={"x-other": "dropped"}) == {}
