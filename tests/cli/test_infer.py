"""`pybackend infer` against a real tritonserver with our backend serving
examples/model_repository: inputs inline, from .npy and .json files, HTTP and gRPC, a
decoupled model's stream, the output forms, and the errors a user meets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest

from pybackend.server import TritonServer

Cli = Any  # the `cli` fixture of conftest.py: runs `python -m pybackend.cli ARGS`

ADD_SUB_LINES = [
    "OUTPUT0\tFP32\t[4]\t[11.0, 22.0, 33.0, 44.0]",
    "OUTPUT1\tFP32\t[4]\t[-9.0, -18.0, -27.0, -36.0]",
]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_add_sub_inline_piped(cli: Cli, examples_server: TritonServer, protocol: str) -> None:
    url = examples_server.http_url if protocol == "http" else f"grpc://{examples_server.grpc_url}"
    done = cli("infer", url, "add_sub", "INPUT0=1,2,3,4", "INPUT1=[10,20,30,40]")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ADD_SUB_LINES


def test_inputs_from_files(cli: Cli, examples_server: TritonServer, tmp_path: Path) -> None:
    np.save(tmp_path / "a.npy", np.array([1, 2, 3, 4], np.float32))
    (tmp_path / "b.json").write_text(json.dumps([10, 20, 30, 40]))
    done = cli(
        "infer",
        examples_server.http_url,
        "add_sub",
        f"INPUT0=@{tmp_path}/a.npy",
        f"INPUT1=@{tmp_path}/b.json",
    )
    assert done.stdout.splitlines() == ADD_SUB_LINES, done.stderr


def test_json_and_npz(cli: Cli, examples_server: TritonServer, tmp_path: Path) -> None:
    args = ("infer", examples_server.http_url, "add_sub", "INPUT0=1,2,3,4", "INPUT1=1,1,1,1")
    doc = json.loads(cli(*args, "--json").stdout)
    assert doc == {
        "model": "add_sub",
        "outputs": [
            {"name": "OUTPUT0", "datatype": "FP32", "shape": [4], "data": [2.0, 3.0, 4.0, 5.0]},
            {"name": "OUTPUT1", "datatype": "FP32", "shape": [4], "data": [0.0, 1.0, 2.0, 3.0]},
        ],
    }
    done = cli(*args, "--npz", tmp_path / "out.npz", "--output", "OUTPUT1")
    assert done.stdout == f"wrote {tmp_path}/out.npz (OUTPUT1)\n"
    with np.load(tmp_path / "out.npz") as saved:
        assert saved["OUTPUT1"].tolist() == [0, 1, 2, 3]


def test_bytes_and_a_batch_dimension(cli: Cli, examples_server: TritonServer) -> None:
    # string_echo batches (max_batch_size 8): the batch dimension of 1 is added.
    done = cli("infer", examples_server.http_url, "string_echo", "INPUT0=hello")
    assert done.stdout.splitlines() == [
        'OUTPUT0\tBYTES\t[1, 1]\t[["hello"]]',
        'OUTPUT1\tBYTES\t[1, 1]\t[["olleh"]]',
    ]
    done = cli("infer", examples_server.http_url, "batched_scale", "INPUT0=1,2,3,4")
    assert done.stdout == "OUTPUT0\tFP32\t[1, 4]\t[[2.0, 4.0, 6.0, 8.0]]\n"


@pytest.mark.parametrize("protocol,sequence_id", [("http", "31"), ("grpc", "user-31")])
def test_a_sequence_of_a_stateful_model(
    cli: Cli, examples_server: TritonServer, protocol: str, sequence_id: str
) -> None:
    """running_sum keeps a sum per sequence: --sequence-id, --sequence-start, --sequence-end
    (a number is an integer correlation id, anything else a string)."""
    url = examples_server.http_url if protocol == "http" else f"grpc://{examples_server.grpc_url}"
    sums = []
    for value, flags in ((3, ["--sequence-start"]), (4, []), (5, ["--sequence-end"])):
        done = cli(
            "infer", url, "running_sum", f"VALUE={value}", "--sequence-id", sequence_id, *flags
        )
        assert done.returncode == 0, done.stderr
        sums.append(done.stdout)
    assert sums == [f"SUM\tINT64\t[1, 1]\t[[{n}]]\n" for n in (3, 7, 12)]


def test_stream_of_a_decoupled_model(cli: Cli, examples_server: TritonServer) -> None:
    done = cli(
        "infer", examples_server.grpc_url, "token_stream", "--stream", "PROMPT=the quick brown fox"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        '0\tTOKEN\tBYTES\t[1]\t["Fox"]',
        "0\tINDEX\tINT32\t[1]\t[0]",
        '1\tTOKEN\tBYTES\t[1]\t["Brown"]',
        "1\tINDEX\tINT32\t[1]\t[1]",
        '2\tTOKEN\tBYTES\t[1]\t["Quick"]',
        "2\tINDEX\tINT32\t[1]\t[2]",
        '3\tTOKEN\tBYTES\t[1]\t["The"]',
        "3\tINDEX\tINT32\t[1]\t[3]",
    ]
    doc = json.loads(
        cli(
            "infer",
            examples_server.grpc_url,
            "token_stream",
            "--stream",
            "PROMPT=a b",
            "MAX_TOKENS=1",
            "--json",
        ).stdout
    )
    assert [r["outputs"][0]["data"] for r in doc["responses"]] == [["B"]]


def test_a_table_on_a_terminal(
    cli_on_terminal: Callable[..., str], examples_server: TritonServer
) -> None:
    out = cli_on_terminal(
        "infer", examples_server.http_url, "add_sub", "INPUT0=1,2,3,4", "INPUT1=1,1,1,1"
    )
    assert out.splitlines() == [
        "OUTPUT   DATATYPE  SHAPE  VALUE",
        "-------  --------  -----  --------------------",
        "OUTPUT0  FP32      [4]    [2.0, 3.0, 4.0, 5.0]",
        "OUTPUT1  FP32      [4]    [0.0, 1.0, 2.0, 3.0]",
    ]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["add_sub", "INPUT0=1,2,3,4"],
            "model 'add_sub' needs INPUT1 (FP32, shape [4]): give INPUT1=...",
        ),
        (
            ["add_sub", "INPUT0=1,2,3", "INPUT1=1,1,1,1"],
            "INPUT0: 3 values of shape [3] do not fit its shape [4] (-1: any size)",
        ),
        (
            ["add_sub", "INPUT0=1,2,3,4", "INPUT1=a,b,c,d"],
            "INPUT1: ['a', 'b', 'c', 'd'] is not FP32 data",
        ),
        (
            ["add_sub", "EXTRA=1"],
            "model 'add_sub' has no input 'EXTRA' "
            "(its inputs: INPUT0 (FP32, [4]), INPUT1 (FP32, [4]))",
        ),
        (["nope", "X=1"], "model 'nope': Request for unknown model: 'nope' is not found"),
        (
            ["error_model", "INPUT0=1,2"],
            "model 'error_model': Failed to process the request(s) for model 'error_model_0_0', "
            "message: ValueError: error_model refuses every request (first one had 2 values)",
        ),
        (
            ["running_sum", "VALUE=1"],
            "model 'running_sum': inference request to model 'running_sum' must specify a "
            "non-zero or non-empty correlation ID (the model is stateful: give --sequence-id "
            "ID, with --sequence-start on a sequence's first request and --sequence-end on its "
            "last)",
        ),
        (
            ["add_sub", "INPUT0=1,2,3,4", "INPUT1=1,1,1,1", "--sequence-start"],
            "--sequence-start and --sequence-end need --sequence-id",
        ),
        (
            ["token_stream", "PROMPT=hi"],
            "model 'token_stream' is decoupled (it streams its responses): add --stream, "
            "and give the server's gRPC address",
        ),
    ],
)
def test_errors(cli: Cli, examples_server: TritonServer, args: list, message: str) -> None:
    done = cli("infer", examples_server.http_url, *args)
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.startswith(f"pybackend infer: {message}"), done.stderr


def test_no_server_there(cli: Cli) -> None:
    from pybackend.server.processes import free_ports

    (port,) = free_ports(1)
    done = cli("infer", f"127.0.0.1:{port}", "add_sub", "INPUT0=1")
    assert done.returncode == 1
    assert done.stderr.startswith(f"pybackend infer: cannot reach http://127.0.0.1:{port}: ")


def test_against_the_development_server(cli: Cli) -> None:
    """The same requests to `pybackend devserve` (here in this process), which speaks
    tritonserver's protocols."""
    from integration_support import EXAMPLES_REPOSITORY
    from pybackend.devserver import DevServer

    with DevServer(EXAMPLES_REPOSITORY, grpc_port=0, in_process=True, echo_logs=False) as dev:
        done = cli("infer", dev.http_url, "add_sub", "INPUT0=1,2,3,4", "INPUT1=[10,20,30,40]")
        assert done.stdout.splitlines() == ADD_SUB_LINES, done.stderr
        done = cli("infer", dev.grpc_url, "token_stream", "--stream", "PROMPT=a b")
        assert done.stdout.splitlines() == [
            '0\tTOKEN\tBYTES\t[1]\t["B"]',
            "0\tINDEX\tINT32\t[1]\t[0]",
            '1\tTOKEN\tBYTES\t[1]\t["A"]',
            "1\tINDEX\tINT32\t[1]\t[1]",
        ], done.stderr


EMPTY_FIRST = """
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            x = pb_utils.get_input_tensor_by_name(request, "X").as_numpy()
            sender.send(pb_utils.InferenceResponse([]))
            sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
"""


def test_a_streamed_response_without_outputs_is_counted(cli: Cli, tmp_path: Path) -> None:
    # A client gets it; the stream used to drop it (only the FINAL flag alone is none).
    from pybackend.testing import ServerModel

    (tmp_path / "empty_first" / "1").mkdir(parents=True)
    (tmp_path / "empty_first" / "1" / "model.py").write_text(EMPTY_FIRST)
    (tmp_path / "empty_first" / "config.pbtxt").write_text(
        'backend: "python"\nmodel_transaction_policy { decoupled: true }\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
        'output [ { name: "Y" data_type: TYPE_FP32 dims: [ 2 ] } ]\n'
    )
    with ServerModel(tmp_path / "empty_first") as model:
        url = f"grpc://{model.server.grpc_url}"
        done = cli("infer", url, "empty_first", "--stream", "X=1,2")
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == ["1\tY\tFP32\t[2]\t[1.0, 2.0]"]
        doc = json.loads(cli("infer", url, "empty_first", "--stream", "X=1,2", "--json").stdout)
    assert [len(r["outputs"]) for r in doc["responses"]] == [0, 1]
