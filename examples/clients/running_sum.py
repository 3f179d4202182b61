#!/usr/bin/env python3
"""Send numbers to the `running_sum` example model as one sequence (START with the first,
END with the last) over HTTP and print the running sums.

    python examples/clients/running_sum.py --url 127.0.0.1:8000 3 4 5
"""

from __future__ import annotations

import argparse
import sys
from typing import List, Union

import numpy as np
import tritonclient.http as httpclient


def running_sums(url: str, sequence_id: Union[int, str], values: List[int]) -> List[int]:
    """The sum after each value, the values sent as one sequence."""
    client = httpclient.InferenceServerClient(url)
    try:
        sums = []
        for i, value in enumerate(values):
            given = httpclient.InferInput("VALUE", [1, 1], "INT64")  # a batch of one
            given.set_data_from_numpy(np.array([[value]], dtype=np.int64))
            result = client.infer(
                "running_sum",
                [given],
                sequence_id=sequence_id,
                sequence_start=i == 0,
                sequence_end=i == len(values) - 1,
            )
            sums.append(int(result.as_numpy("SUM")[0, 0]))
        return sums
    finally:
        client.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="127.0.0.1:8000", help="the server's HTTP address")
    parser.add_argument("--sequence-id", default=1, type=int, help="the sequence's id")
    parser.add_argument("values", nargs="+", type=int)
    args = parser.parse_args()
    for value, total in zip(args.values, running_sums(args.url, args.sequence_id, args.values)):
        print(f"+{value} = {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
