"""Comparing float32 results of dynamically batched requests with the per-request answer.

Which requests share one execute() depends on timing, and a matmul (or a sum) over a batch of
another size may take another BLAS kernel, which adds the same products in another order: a
result may then differ from the per-request one in its last bits. Exact equality, or a
relative tolerance alone (useless near 0, where the terms cancel), makes such a test fail by
timing. The bound below is the standard one for a float32 dot product of length K (Higham,
"Accuracy and Stability of Numerical Algorithms", 3.1: |error| <= K * u * sum |a_i * b_i|, u
the unit roundoff, half of float32's eps), doubled: the served value and the expected one are
each computed in some order. It is far below any real error: a row routed to the wrong request
or a wrong weight changes a value by the size of the values themselves.
"""

from __future__ import annotations

import numpy as np

FLOAT32_EPS = float(np.finfo(np.float32).eps)


def assert_matmul_close(got: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
    """``got`` is ``a @ b`` computed in float32 in any order of summation."""
    a64 = np.asarray(a, np.float64)
    b64 = np.asarray(b, np.float64)
    exact = a64 @ b64
    reduction = a64.shape[-1]
    bound = reduction * FLOAT32_EPS * (np.abs(a64) @ np.abs(b64))
    got64 = np.asarray(got, np.float64)
    assert got64.shape == exact.shape, f"shape {got64.shape}, expected {exact.shape}"
    excess = np.abs(got64 - exact) - bound
    if np.any(excess > 0):
        worst = tuple(int(i) for i in np.unravel_index(int(np.argmax(excess)), excess.shape))
        raise AssertionError(
            f"a @ b differs by more than float32 rounding ({reduction} terms) at {worst}: "
            f"got {float(got64[worst])}, exact {float(exact[worst])}, "
            f"allowed +-{float(bound[worst]):.3g}\n"
            f"got:\n{got64}\nexpected:\n{exact}"
        )
