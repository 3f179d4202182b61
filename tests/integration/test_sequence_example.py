"""The stateful example (examples/model_repository/running_sum and
examples/clients/running_sum.py) through a real tritonserver: a running sum per sequence,
sequences interleaved with integer and string ids, the server's refusal of a request of an
ended sequence. Its `sequence_idle` (the sequence's state dropped when the server ends an
idle one) is tests/testing/test_sequence_idle.py's subject.

Runs against the original too (PYBACKEND_TEST_BACKEND=original): same sums.
"""

from __future__ import annotations

import subprocess
import sys
from types import ModuleType

import numpy as np
import pytest
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

from integration_support import EXAMPLE_CLIENTS, example_client

CLIENT_SCRIPT = EXAMPLE_CLIENTS / "running_sum.py"


@pytest.fixture(scope="module")
def sum_client() -> ModuleType:
    return example_client("running_sum")


def _add(url: str, sequence_id, value: int, **flags: bool) -> int:
    client = httpclient.InferenceServerClient(url)
    try:
        given = httpclient.InferInput("VALUE", [1, 1], "INT64")
        given.set_data_from_numpy(np.array([[value]], dtype=np.int64))
        result = client.infer("running_sum", [given], sequence_id=sequence_id, **flags)
        return int(result.as_numpy("SUM")[0, 0])
    finally:
        client.close()


def test_the_client_prints_the_running_sums(examples_server) -> None:
    done = subprocess.run(
        [sys.executable, str(CLIENT_SCRIPT), "--url", examples_server.http_url, "3", "4", "5"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout.splitlines() == ["+3 = 3", "+4 = 7", "+5 = 12"]


def test_interleaved_sequences_keep_their_own_sums(examples_server, sum_client) -> None:
    url = examples_server.http_url
    assert _add(url, 101, 1, sequence_start=True) == 1
    assert _add(url, "user-7", 10, sequence_start=True) == 10
    assert _add(url, 101, 2) == 3
    assert _add(url, "user-7", 20) == 30
    assert _add(url, 101, 3, sequence_end=True) == 6
    assert _add(url, "user-7", 30, sequence_end=True) == 60
    assert sum_client.running_sums(url, 101, [5, 5]) == [5, 10]  # the id again, from 0


def test_a_request_of_an_ended_sequence_is_refused(examples_server, sum_client) -> None:
    url = examples_server.http_url
    assert sum_client.running_sums(url, 202, [1]) == [1]  # START and END at once
    with pytest.raises(InferenceServerException, match="must specify the START flag"):
        _add(url, 202, 1)
