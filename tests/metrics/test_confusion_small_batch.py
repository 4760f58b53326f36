"""``ConfusionMatrix.update_many`` counts a small unweighted batch of str labels without numpy
(issue 24, point 3: a window's few events); the state equals the numpy path's, and every batch
that path would read otherwise (other kinds, NUL-ended strings numpy strips, unhashable labels,
weights, fixed labels) still goes through it, with its errors."""
from __future__ import annotations

import random

import pytest

from streammetrics.metrics import confusion
from streammetrics.metrics.confusion import ConfusionMatrix

POOL = ["a", "b", "", "é", "x y", "\x00a", "a\x00", "10", "__other__"]


def _pair(rng: random.Random, n: int) -> tuple[list, list]:
    return [rng.choice(POOL) for _ in range(n)], [rng.choice(POOL) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_small_batches_give_the_numpy_paths_state(seed, monkeypatch):
    rng = random.Random(seed)
    batches = [_pair(rng, rng.randint(0, 40)) for _ in range(30)]
    fast = ConfusionMatrix()
    states = [fast.update_many(t, p).to_dict() for t, p in batches]
    monkeypatch.setattr(confusion, "SMALL_BATCH", -1)  # every batch through numpy
    slow = ConfusionMatrix()
    assert [slow.update_many(t, p).to_dict() for t, p in batches] == states
    assert fast.labels == slow.labels and fast.count == slow.count


def test_the_small_path_is_taken(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("numpy path")

    monkeypatch.setattr(confusion, "as_label_array", refuse)
    cm = ConfusionMatrix().update_many(["a", "b", "b"], ["a", "a", "b"])
    assert cm.counts() == {("a", "a"): 1, ("b", "a"): 1, ("b", "b"): 1}


@pytest.mark.parametrize("t, p, w", [
    (["a", 1], ["a", "b"], None),  # a number among str
    (["a", "b"], ["a", ["b"]], None),  # unhashable
    (["a", "b"], ["a"], None),  # lengths
    (["a", "b"], ["a", "b"], [1.0, -1.0]),  # a bad weight
    (["a", "b"], ["a", "b"], [1.0, 2.0]),  # weights
    (["a\x00", "b"], ["a", "b"], None),  # numpy strips the NUL
    ([1, 2], [1, "2"], None),
])
def test_other_batches_give_what_the_numpy_path_gives(t, p, w, monkeypatch):
    outcomes = []
    for small in (256, -1):
        monkeypatch.setattr(confusion, "SMALL_BATCH", small)
        cm = ConfusionMatrix().update_many(["a"], ["a"])
        try:
            cm.update_many(t, p, w)
            outcomes.append(cm.to_dict())
        except (ValueError, TypeError) as exc:
            outcomes.append((type(exc), str(exc), cm.to_dict()))
    assert outcomes[0] == outcomes[1]


def test_a_str_batch_into_a_number_matrix_is_refused_as_before():
    cm = ConfusionMatrix().update_many([1, 2], [2, 2])
    with pytest.raises(ValueError, match="holds number labels"):
        cm.update_many(["a"], ["b"])
    assert cm.count == 2
