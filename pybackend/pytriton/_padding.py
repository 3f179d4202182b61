"""``ConstantPadder`` (``pytriton.decorators.ConstantPadder``), the pad_fn PyTriton offers
for ``group_by_values``: outputs of the groups padded to common trailing dims."""

from __future__ import annotations

import collections
from typing import Any, Dict, List, Sequence

import numpy as np

from .exceptions import PyTritonRuntimeError


class ConstantPadder:
    """pad_fn for group_by_values: pads each output to the largest trailing dims of the
    groups with ``pad_value`` (b"" for strings)."""

    def __init__(self, pad_value: Any = 0) -> None:
        self.pad_value = pad_value

    def __call__(
        self, batches_list: Sequence[Dict[str, np.ndarray]]
    ) -> List[Dict[str, np.ndarray]]:
        names = list(collections.OrderedDict.fromkeys(n for b in batches_list for n in b))
        by_name = {n: [b.get(n) for b in batches_list] for n in names}
        for arrays in by_name.values():
            present = [a for a in arrays if a is not None]
            shape = tuple(np.max([a.shape[1:] for a in present], axis=0))
            dtype = _common_dtype([a.dtype for a in present])
            for i, a in enumerate(arrays):
                if a is None:
                    continue
                fill = self.pad_value if dtype.kind not in "SUO" else b""
                widths = [(0, 0)] + [(0, t - s) for s, t in zip(a.shape[1:], shape)]
                arrays[i] = np.pad(a, widths, mode="constant", constant_values=fill).astype(dtype)
        out: List[Dict[str, np.ndarray]] = []
        for i in range(len(batches_list)):
            item = {}
            for n, arrays in by_name.items():
                a = arrays[i]
                if a is not None:
                    item[n] = a
            out.append(item)
        return out


def _common_dtype(dtypes: List[np.dtype]) -> np.dtype:
    first = dtypes[0]
    if not all(d.kind == first.kind for d in dtypes):
        raise PyTritonRuntimeError(
            "All input arrays for given input name must have the same dtype."
        )
    if first.kind in "SU":
        return np.dtype(f"{first.str[:2]}{max(int(d.str[2:]) for d in dtypes)}")
    if not all(d == first for d in dtypes):
        raise PyTritonRuntimeError(
            "All input arrays for given input name must have the same dtype."
        )
    return first
