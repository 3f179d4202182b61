"""Stacking requests' rows along dim 0 and cutting outputs back per request: the one core
of ``pb_utils.batch_requests`` (batching.py) and PyTriton's ``@batch``
(pybackend/pytriton/decorators.py)."""

from __future__ import annotations

from typing import Any, Dict, Iterable, List, Mapping, Sequence

import numpy as np


def stack(parts: Sequence[Mapping[str, np.ndarray]], names: Iterable[str]) -> Dict[str, np.ndarray]:
    """One array per name: every part's rows, in order (a single part is not copied)."""
    return {
        name: parts[0][name] if len(parts) == 1 else np.concatenate([p[name] for p in parts])
        for name in names
    }


def offsets(sizes: Sequence[int]) -> List[int]:
    """[0, sizes[0], sizes[0] + sizes[1], ...]: where each part's rows start (and the end)."""
    out = [0]
    for size in sizes:
        out.append(out[-1] + int(size))
    return out


def split(arrays: Mapping[str, np.ndarray], sizes: Sequence[int]) -> List[Dict[str, np.ndarray]]:
    """Each part's rows of every array (views, no copy)."""
    at = offsets(sizes)
    return [{name: a[at[i] : at[i + 1]] for name, a in arrays.items()} for i in range(len(sizes))]


def pad_to_common(parts: List[np.ndarray], value: Any) -> List[np.ndarray]:
    """Pad every part's trailing dims with ``value`` up to the largest of the parts."""
    target = tuple(max(p.shape[d] for p in parts) for d in range(1, parts[0].ndim))
    out = []
    for p in parts:
        if p.shape[1:] == target:
            out.append(p)
            continue
        widths = [(0, 0)] + [(0, t - s) for s, t in zip(p.shape[1:], target)]
        out.append(np.pad(p, widths, mode="constant", constant_values=value))
    return out
