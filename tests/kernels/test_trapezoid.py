"""ranking.trapezoid is numpy's trapezoid formula on every numpy the project supports."""
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streammetrics.kernels.ranking import trapezoid

_numpy_trapezoid = getattr(np, "trapezoid", None) or np.trapz

floats = st.floats(0.0, 1.0, allow_nan=False)


@given(st.lists(st.tuples(floats, floats), min_size=0, max_size=50))
def test_trapezoid_is_numpys_bit_for_bit(points):
    x = np.sort(np.array([p[0] for p in points], dtype=np.float64))
    y = np.array([p[1] for p in points], dtype=np.float64)
    assert trapezoid(y, x) == float(_numpy_trapezoid(y, x))


def test_trapezoid_area():
    assert trapezoid([0.0, 1.0], [0.0, 1.0]) == 0.5
    assert trapezoid([1.0], [0.0]) == 0.0
