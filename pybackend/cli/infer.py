"""`pybackend infer URL MODEL NAME=VALUE...`: send one request to a Triton server (or
stream a decoupled model's responses) and print the outputs: a table on a terminal,
tab-separated lines when piped, or JSON / an .npz file."""

from __future__ import annotations

import argparse
import json
import shutil
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from pybackend.cli.command import add_command

from .terminal import is_terminal, table

if TYPE_CHECKING:  # numpy and tritonclient are imported when the command runs
    import numpy as np

EXAMPLE = """\
inputs (data types and shapes come from the model's metadata):
  NAME=1,2,3            comma-separated values
  NAME='[[1,2],[3,4]]'  a JSON list (its nesting is the shape)
  NAME=hello            text, for a BYTES input
  NAME=@x.npy           a numpy file;  NAME=@x.json: a JSON file
  A batch dimension of 1 is added, and flat values take a fixed declared shape.

examples:
  pybackend infer localhost:8000 add_sub INPUT0=1,2,3,4 INPUT1=@ones.npy
  pybackend infer grpc://localhost:8001 token_stream --stream PROMPT="the quick brown fox"
  pybackend infer localhost:8000 add_sub INPUT0=1,2,3,4 INPUT1=1,1,1,1 --json | jq .
  pybackend infer localhost:8000 running_sum VALUE=3 --sequence-id 7 --sequence-start

exit codes: 0 the model answered, 1 an error (the server's text is printed), 2 bad command line.
"""

Named = List[Tuple[str, str, "np.ndarray"]]


def add_parser(commands: argparse._SubParsersAction) -> None:
    parser = add_command(
        commands,
        "infer",
        help="send a request to a model on a Triton server and print the outputs",
        description=(
            "Send one inference request to MODEL on the Triton server at URL (tritonserver "
            "or pybackend devserve; http://HOST:PORT, grpc://HOST:PORT, or HOST:PORT for "
            "HTTP) and print its outputs; --stream prints a decoupled model's responses as "
            "they come (gRPC)."
        ),
        epilog=EXAMPLE,
    )
    parser.add_argument("url", metavar="URL")
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument("inputs", metavar="NAME=VALUE", nargs="*", help="the request's inputs")
    parser.add_argument("--grpc", action="store_true", help="HOST:PORT is a gRPC endpoint")
    parser.add_argument("--stream", action="store_true", help="a decoupled model: all responses")
    parser.add_argument(
        "--output", action="append", default=[], metavar="NAME", help="ask for these outputs only"
    )
    parser.add_argument("--model-version", default="", metavar="N", help="default: the server's")
    parser.add_argument(
        "--timeout", type=float, default=60.0, metavar="S", help="wait at most S s (default 60)"
    )
    parser.add_argument(
        "--sequence-id",
        metavar="ID",
        help="a stateful model's sequence (its correlation id: a number, else a string)",
    )
    parser.add_argument(
        "--sequence-start", action="store_true", help="the request starts the sequence"
    )
    parser.add_argument("--sequence-end", action="store_true", help="the request ends it")
    form = parser.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help="print the outputs as JSON")
    form.add_argument("--npz", metavar="FILE", help="write the outputs to FILE (numpy .npz)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import numpy as np

    from .infer_client import Client, ClientError, Request, target
    from .infer_inputs import build_inputs

    sequence = _sequence(args)  # checked before anything is sent
    where = target(args.url, args.grpc or (args.stream and "://" not in args.url))
    client = Client(where, args.timeout)
    try:
        specs, decoupled = client.inputs_of(args.model, args.model_version)
        if decoupled and not args.stream:
            raise ClientError(
                f"model '{args.model}' is decoupled (it streams its responses): add --stream, "
                "and give the server's gRPC address"
            )
        arrays = build_inputs(args.inputs, specs, args.model)
        req = Request(args.model, args.model_version, arrays, specs, args.output, sequence)
        responses = _show(args, client.stream(req) if args.stream else [client.infer(req)])
    finally:
        client.close()
    if args.json:
        doc: Dict[str, Any] = {"model": args.model}
        if args.stream:
            doc["responses"] = [{"outputs": [_as_json(o) for o in r]} for r in responses]
        else:
            doc["outputs"] = [_as_json(o) for o in responses[0]]
        print(json.dumps(doc, indent=2))
    elif args.npz:
        many = args.stream
        arrays_out = {
            (f"{n}_{i}" if many else n): a for i, r in enumerate(responses) for n, _, a in r
        }
        np.savez(args.npz, **arrays_out)  # type: ignore[arg-type]
        print(f"wrote {args.npz} ({', '.join(arrays_out)})")
    return 0


def _sequence(args: argparse.Namespace) -> Dict[str, Any]:
    """tritonclient's sequence arguments from the command line ({}: none given)."""
    from .infer_client import ClientError

    if args.sequence_id is None:
        if args.sequence_start or args.sequence_end:
            raise ClientError("--sequence-start and --sequence-end need --sequence-id")
        return {}
    given: str = args.sequence_id
    sequence_id: Any = int(given) if given.isascii() and given.isdigit() else given
    if sequence_id in (0, ""):
        raise ClientError("--sequence-id must be a non-zero number or a non-empty string")
    return {
        "sequence_id": sequence_id,
        "sequence_start": args.sequence_start,
        "sequence_end": args.sequence_end,
    }


def _show(args: argparse.Namespace, responses: Any) -> List[Named]:
    """Every response; printed as each arrives unless the form is --json or --npz."""
    quiet = args.json or bool(args.npz)
    terminal = is_terminal()
    got: List[Named] = []
    for index, named in enumerate(responses):
        got.append(named)
        if quiet:
            continue
        rows = [[n, d, str(list(a.shape)), _text(a)] for n, d, a in named]
        if args.stream:
            rows = [[str(index), *r] for r in rows]
        if terminal:
            header = (["RESPONSE"] if args.stream else []) + [
                "OUTPUT",
                "DATATYPE",
                "SHAPE",
                "VALUE",
            ]
            text = table(header, [_fit(r) for r in rows])
            print(text if index == 0 else "\n".join(text.splitlines()[2:]), flush=True)
        else:
            for row in rows:
                print("\t".join(row), flush=True)
    return got


def _plain(array: np.ndarray) -> Any:
    import numpy as np

    if array.dtype == np.object_:
        flat = [_decoded(v) for v in array.reshape(-1)]
        return np.array(flat, dtype=object).reshape(array.shape).tolist()
    return array.tolist()


def _decoded(value: Any) -> Any:
    if isinstance(value, bytes):
        try:
            return value.decode()
        except UnicodeDecodeError:
            return repr(value)
    return value


def _text(array: np.ndarray) -> str:
    return json.dumps(_plain(array), ensure_ascii=False)


def _fit(row: List[str]) -> List[str]:
    """A terminal row whose value column is cut to the terminal's width."""
    width = shutil.get_terminal_size((120, 24)).columns - sum(len(c) + 2 for c in row[:-1])
    value = row[-1]
    return row[:-1] + [
        value if len(value) <= max(width, 20) else value[: max(width, 20) - 3] + "..."
    ]


def _as_json(named: Tuple[str, str, np.ndarray]) -> Dict[str, Any]:
    name, datatype, array = named
    return {"name": name, "datatype": datatype, "shape": list(array.shape), "data": _plain(array)}
