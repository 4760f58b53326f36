"""CBPE intervals of a window whose calibrated probabilities are tiny (below ~1e-77 the fourth
power of its expected positives underflows to 0): no interval (too few expected events), and no
ZeroDivisionError (``replay --reference`` died on one such event) nor numpy warning."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from streammetrics.kernels import cbpe


@pytest.mark.parametrize("c0", [2e-200, 1e-80, 1e-160, 5e-324])
def test_tiny_calibrated_probabilities_give_no_interval_and_no_error(c0: float) -> None:
    c = np.array([c0, c0 * 2])
    w = np.array([1.0, 3.0])
    predicted = np.array([False, False])
    block = np.array([0, 0])
    block_var = np.array([1e-6])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        one = cbpe.estimated_intervals(c, w, predicted, 1.96, block=block, block_var=block_var,
                                       reference_events=100.0)
        rows = cbpe.estimated_rows(c[None, :], w[None, :], predicted[None, :], np.array([2]), 1.96, block[None, :],
                                   block_var, 100.0)
    assert one.get("estimated_recall") is None and one.get("estimated_f1") is None
    assert rows[0][1] == one
