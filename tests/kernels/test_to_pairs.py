"""exact_sum.to_pairs: to_pair of many floats in one pass, the same pairs."""
from __future__ import annotations

import numpy as np

from streammetrics.kernels.exact_sum import from_pair, to_pair, to_pairs


def test_the_same_pairs_as_to_pair():
    rng = np.random.default_rng(5)
    values = [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, -1.0, 0.1, 3.0]
    values += (rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200)).tolist()
    got = to_pairs(values)
    assert got == [to_pair(x) for x in values]
    assert all(p[0].__class__ is int and p[1].__class__ is int for p in got)
    assert [from_pair(p) for p in got] == [x + 0.0 for x in values]
    assert to_pairs([]) == []
