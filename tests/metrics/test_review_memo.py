"""MulticlassScores memoises its one-vs-rest AUCs, columns and arg-max confusion matrix per state:
after every kind of change (update, update_many, merge with a float, units or grid state, a
merge with itself, reset, copy, pickling, the move to units and to the log grid) a memoised
accumulator answers exactly as a fresh one rebuilt from its state, and the memo's fast columns
(float weights, exact scores) give what the units path gives for the same state."""
from __future__ import annotations

import functools
import pickle
import random
import warnings

import numpy as np

from streammetrics.metrics.multiclass_scores import MulticlassScores

CLASSES = ["a", "b", "c", "d"]


def _reads(sc: MulticlassScores) -> list:
    """Every value a snapshot reads from the memo (as text: nan-safe, bit-exact)."""
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for average in ("macro", "weighted", None):
            out.append(repr(np.asarray(sc.roc_auc(average=average)).tolist()))
            out.append(repr(np.asarray(sc.roc_auc_bounds(average=average)).tolist()))
            out.append(repr(np.asarray(sc.average_precision(average=average)).tolist()))
        for average in ("macro", "weighted"):
            out.append(repr(sc.interval("roc_auc", average=average)))
        out.append(repr(sc.interval("top_k_accuracy")))
        out.append(repr(sc.confusion().to_dict()))
        out.append(repr(sc.to_dict()))
    return out


def _batch(rng: random.Random, n: int, weights: str):
    y = [rng.choice(CLASSES[:3] if rng.random() < 0.3 else CLASSES) for _ in range(n)]  # a class absent at times
    s = np.array([[round(rng.random(), 2) for _ in CLASSES] for _ in range(n)])
    w = None
    if weights == "whole":
        w = np.array([float(rng.choice([1, 2, 0])) for _ in range(n)])
    elif weights == "fraction":
        w = np.array([rng.choice([0.3, 1.0, 2.5]) for _ in range(n)])
    return y, s, w


def _check(sc: MulticlassScores) -> None:
    fresh = MulticlassScores.from_dict(sc.to_dict())
    assert _reads(sc) == _reads(fresh)


def test_memo_is_emptied_by_every_change():
    rng = random.Random(5)
    for _ in range(12):
        make = functools.partial(MulticlassScores, CLASSES, **rng.choice([{"max_exact": 30}, {"max_exact": 200}, {}]))
        sc = make()
        for _ in range(14):
            _reads(sc)  # the memo filled from this state
            op = rng.choice(["update", "update_many", "merge", "merge_self", "reset", "copy", "pickle"])
            weights = rng.choice(["none", "none", "whole", "fraction"])
            if op == "update":
                y, s, w = _batch(rng, 1, weights)
                sc.update(y[0], s[0].tolist(), 1.0 if w is None else float(w[0]))
            elif op == "update_many":
                sc.update_many(*_batch(rng, rng.choice([1, 5, 60]), weights))
            elif op == "merge":
                sc.merge(make().update_many(*_batch(rng, rng.choice([3, 80]), weights)))
            elif op == "merge_self":
                sc.merge(sc)
            elif op == "reset":
                sc.reset()
            elif op == "copy":  # the copy and the original change apart
                other = sc.copy()
                _reads(other)
                other.update_many(*_batch(rng, 7, weights))
                _check(other)
            else:
                sc = pickle.loads(pickle.dumps(sc))
            _check(sc)


def test_fast_columns_equal_the_units_path():
    """While weights are floats and scores exact the memo sums the pair histograms per class;
    the same state in units reads the one-vs-rest set: the same AUCs, bounds, intervals,
    average precision and state."""
    rng = random.Random(8)
    for n in (3, 40, 300):
        floats = MulticlassScores(CLASSES).update_many(*_batch(rng, n, rng.choice(["none", "whole"])))
        units = floats.copy()
        units._to_units()  # (the same state: its sums ints of units of 2**-1074)
        assert _reads(units) == _reads(floats)
