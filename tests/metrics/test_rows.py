"""One multilabel row parser: MultilabelScores and MultilabelConfusion raise the same error
for the same bad truth rows and matrices."""
import numpy as np
import pytest

import streammetrics as sm

BAD_ROWS = [[0, 1], [0, 2, 1], {"q"}, "abc", 5, np.zeros((2, 3)), [0, "1", 1]]
BAD_MATRICES = [[[0, 1, 0], [0, 1]], "abc", [[0, 1, 2]], np.ones((2, 2)), [{"q"}]]


def _error(fn):
    with pytest.raises((TypeError, ValueError)) as info:
        fn()
    return type(info.value), str(info.value)


@pytest.mark.parametrize("row", BAD_ROWS, ids=repr)
def test_same_error_for_a_bad_row(row):
    labels = ["a", "b", "c"]
    scores = _error(lambda: sm.MultilabelScores(labels).update(row, [0.1, 0.2, 0.3]))
    confusion = _error(lambda: sm.MultilabelConfusion(labels).update(row, [0, 0, 0]))
    assert scores == confusion


@pytest.mark.parametrize("rows", BAD_MATRICES, ids=repr)
def test_same_error_for_a_bad_matrix(rows):
    labels = ["a", "b", "c"]
    n = len(rows) if isinstance(rows, (list, np.ndarray)) else 1
    scores = _error(lambda: sm.MultilabelScores(labels).update_many(rows, np.full((n, 3), 0.5)))
    confusion = _error(lambda: sm.MultilabelConfusion(labels).update_many(rows, np.zeros((n, 3), dtype=int)))
    assert scores == confusion
