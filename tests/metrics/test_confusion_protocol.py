"""ConfusionMatrix follows the accumulator protocol: input validation that leaves the
state unchanged, label kinds, empty accumulators, copy/reset/merge, hostile dicts."""
from __future__ import annotations

import json
import math
import warnings

import numpy as np
import pandas as pd
import pytest

import streammetrics as sm
from streammetrics.metrics.confusion import ConfusionMatrix


def filled(labels=None):
    return ConfusionMatrix(labels).update_many([0, 1, 2, 1], [0, 2, 2, 1], [1.0, 2.0, 0.5, 1.0])


def assert_rejected(cm, exc, match, call):
    before = json.dumps(cm.to_dict(), sort_keys=True)
    with pytest.raises(exc, match=match):
        call(cm)
    assert json.dumps(cm.to_dict(), sort_keys=True) == before


# ------------------------------------------------------------------------ bad input
@pytest.mark.parametrize(
    "exc, match, call",
    [
        (ValueError, r"y_true has 2, y_pred has 3", lambda c: c.update_many([0, 1], [0, 1, 2])),
        (ValueError, r"sample_weight has 1, expected 2", lambda c: c.update_many([0, 1], [0, 1], [1.0])),
        (ValueError, r"y_true\[1\] must not be NaN", lambda c: c.update_many([0.0, math.nan], [0, 1])),
        (ValueError, r"y_pred must not be NaN", lambda c: c.update(0, float("nan"))),
        (ValueError, r"sample_weight\[1\] must be non-negative, got -1.0",
         lambda c: c.update_many([0, 1], [0, 1], [1.0, -1.0])),
        (ValueError, r"sample_weight\[0\] must be finite", lambda c: c.update_many([0], [0], [math.inf])),
        (ValueError, r"weight must be finite and non-negative, got -2", lambda c: c.update(0, 1, -2)),
        (ValueError, r"weight must be finite and non-negative, got nan", lambda c: c.update(0, 1, math.nan)),
        (TypeError, r"weight must be a real number, got 'x'", lambda c: c.update(0, 1, "x")),
        (TypeError, r"y_true must be hashable, got \[1\]", lambda c: c.update([1], 0)),
        (TypeError, r"y_pred must be an int, str, bool", lambda c: c.update(0, None)),
        (TypeError, r"y_true\[1\] must be hashable", lambda c: c.update_many(np.array([0, [1]], dtype=object), [0, 1])),
        (ValueError, r"y_true='a' is a str label but y_pred=1", lambda c: c.update("a", 1)),
        (ValueError, r"str labels but this ConfusionMatrix holds number labels", lambda c: c.update("a", "b")),
        (ValueError, r"bool labels but this ConfusionMatrix holds number", lambda c: c.update(True, False)),
        (ValueError, r"y_true holds number labels but y_pred holds str", lambda c: c.update_many([1], ["a"])),
        (ValueError, r"y_pred\[1\] is 'a', a str label",
         lambda c: c.update_many([1, 2], np.array([1, "a"], dtype=object))),
        (ValueError, r"hold bool labels but this ConfusionMatrix holds number",
         lambda c: c.update_many([True], [False])),
    ],
)
def test_bad_input_names_the_argument_and_leaves_state_unchanged(exc, match, call):
    assert_rejected(filled(), exc, match, call)


@pytest.mark.parametrize(
    "match, call",
    [
        (r"y_true=5 is not one of labels \[0, 1, 2\]", lambda c: c.update(5, 0)),
        (r"y_pred=9 is not one of labels", lambda c: c.update(0, 9)),
        (r"y_pred\[2\]=4 is not one of labels \[0, 1, 2\]", lambda c: c.update_many([0, 1, 2], [0, 1, 4])),
        (r"y_true\[1\]=-3 is not one of labels", lambda c: c.update_many([0, -3], [0, 1])),
        (r"y_true\[0\]=1000000 is not one of labels", lambda c: c.update_many([10**6], [0])),
    ],
)
def test_labels_outside_the_fixed_set_raise_and_leave_state_unchanged(match, call):
    assert_rejected(filled([0, 1, 2]), ValueError, match, call)


def test_constructor_validates_labels():
    with pytest.raises(ValueError, match="duplicates"):
        ConfusionMatrix([0, 1, 1])
    with pytest.raises(ValueError, match="mixes label kinds"):
        ConfusionMatrix([0, "a"])
    with pytest.raises(ValueError, match="at least one label"):
        ConfusionMatrix([])
    with pytest.raises(TypeError, match="sequence of labels"):
        ConfusionMatrix("ab")


# ------------------------------------------------------------------------ inputs
def test_numpy_scalars_lists_arrays_and_series_give_the_same_state():
    yt, yp, w = [0, 2, 1, 2], [0, 1, 1, 2], [1.0, 0.0, 2.5, 1.0]
    per_event = ConfusionMatrix()
    for t, p, x in zip(np.array(yt), np.array(yp, dtype=np.float64), np.array(w)):
        per_event.update(t, p, x)
    assert per_event.counts() == {(0, 0): 1.0, (2, 1): 0.0, (1, 1): 2.5, (2, 2): 1.0}
    assert all(type(k) is int for key in per_event.counts() for k in key)
    for args in [(yt, yp, w), (np.array(yt), np.array(yp), np.array(w)),
                 (pd.Series(yt), pd.Series(yp, dtype="float64"), pd.Series(w)),
                 (np.array(yt, dtype=np.uint8), np.array(yp, dtype=np.int16), w)]:
        assert ConfusionMatrix().update_many(*args) == per_event


def test_string_bool_and_object_labels():
    s = ConfusionMatrix().update_many(np.array(["b", "a"]), pd.Series(["a", "a"]))
    s.update(np.str_("c"), "b")
    assert s.labels == ["a", "b", "c"] and s.counts()[("c", "b")] == 1.0
    b = ConfusionMatrix().update_many(np.array([True, False]), [True, True])
    b.update(np.bool_(False), False)
    assert b.labels == [False, True]
    assert b.precision() == 0.5  # pos_label=1 matches True, as in scikit-learn
    f = ConfusionMatrix().update_many([1.5, 2.0], [1.5, 1.5])
    assert f.labels == [1.5, 2] and f.counts() == {(1.5, 1.5): 1.0, (2, 1.5): 1.0}


def test_large_and_negative_int_labels_use_the_general_path():
    yt = [-5, 10**9, 3, -5]
    yp = [-5, 3, 3, 10**9]
    cm = ConfusionMatrix().update_many(yt, yp)
    one = ConfusionMatrix()
    for t, p in zip(yt, yp):
        one.update(t, p)
    assert cm == one and cm.labels == [-5, 3, 10**9]


def test_empty_batch_is_a_no_op_but_still_validated():
    cm = filled()
    before = cm.to_dict()
    cm.update_many([], [])
    cm.update_many(np.array([]), np.array([]), [])
    assert cm.to_dict() == before
    with pytest.raises(ValueError, match="inconsistent batch lengths"):
        cm.update_many([], [1])


def test_update_and_update_many_return_self():
    cm = ConfusionMatrix()
    assert cm.update(1, 1) is cm and cm.update_many([1], [0]) is cm


# ------------------------------------------------------------------------ empty
def test_empty_accumulator_metrics_are_nan_with_a_warning():
    cm = ConfusionMatrix()
    with pytest.warns(sm.UndefinedMetricWarning, match="no events of non-zero weight"):
        assert math.isnan(cm.accuracy())
    assert cm.accuracy(normalize=False) == 0.0
    for metric in (cm.precision, cm.recall, cm.f1, cm.jaccard, cm.specificity,
                   cm.balanced_accuracy, cm.matthews_corrcoef, cm.cohen_kappa):
        with pytest.warns(sm.UndefinedMetricWarning):
            assert math.isnan(metric())
    with pytest.warns(sm.UndefinedMetricWarning):
        assert math.isnan(cm.fbeta(2.0))
    assert cm.matrix().shape == (0, 0) and cm.labels == []
    with pytest.raises(ValueError, match="non-zero weight"):
        cm.classification_report()


def test_zero_weight_events_make_labels_present_but_metrics_undefined():
    cm = ConfusionMatrix([0, 1, 2]).update_many([0, 1], [1, 1], [0.0, 0.0])
    assert cm.count == 2 and cm.total_weight == 0.0
    with pytest.warns(sm.UndefinedMetricWarning):
        per_class = cm.recall(average=None)
    assert per_class.shape == (3,) and np.isnan(per_class).all()
    np.testing.assert_array_equal(cm.matrix(), np.zeros((3, 3)))


def test_parameter_validation():
    cm = filled()
    with pytest.raises(ValueError, match="average has to be one of"):
        cm.f1(average="mean")
    with pytest.raises(ValueError, match="zero_division"):
        cm.precision(average="macro", zero_division=0.5)
    with pytest.raises(ValueError, match="zero_division"):
        cm.jaccard(average="macro", zero_division=np.nan)
    with pytest.raises(ValueError, match="beta must be >= 0"):
        cm.fbeta(-1.0, average="macro")
    with pytest.raises(ValueError, match="Samplewise metrics"):
        cm.recall(average="samples")
    with pytest.raises(ValueError, match="Target is multiclass but average='binary'"):
        cm.f1()
    with pytest.raises(ValueError, match="weights must be"):
        cm.cohen_kappa("cubic")
    with pytest.raises(ValueError, match="digits"):
        cm.classification_report(digits=-1)
    with pytest.warns(UserWarning, match="pos_label"):
        cm.recall(average="macro", pos_label=2)


# ------------------------------------------------------------------------ protocol
def test_copy_reset_merge_and_add():
    a = filled()
    b = a.copy()
    b.update(0, 0)
    assert a.count == 4 and b.count == 5 and a != b
    c = a + b
    assert c.count == 9 and a.count == 4
    assert c.counts()[(0, 0)] == 3.0
    a.reset()
    assert a.count == 0 and a.total_weight == 0.0 and a.counts() == {} and a == ConfusionMatrix()
    a.update("x", "y")  # a reset accumulator forgets its label kind too
    assert a.labels == ["x", "y"]


def test_merge_rejects_other_kinds_and_configurations():
    with pytest.raises(ValueError, match="different configurations"):
        ConfusionMatrix([0, 1]).merge(ConfusionMatrix([1, 0]))
    with pytest.raises(ValueError, match="same type"):
        ConfusionMatrix().merge(sm.MultilabelConfusion(2))
    ints = ConfusionMatrix().update(1, 1)
    strs = ConfusionMatrix().update("a", "a")
    before = ints.to_dict()
    with pytest.raises(ValueError, match="str labels into one of number labels"):
        ints.merge(strs)
    assert ints.to_dict() == before
    assert ConfusionMatrix().merge(strs).labels == ["a"]


def test_from_counts_builds_the_same_state_as_events():
    cm = ConfusionMatrix._from_counts([0, 1], {(1, 1): 3.0, (0, 1): 1.0, (0, 0): 2.0}, 6)
    events = ConfusionMatrix([0, 1]).update_many([1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0, 0])
    assert cm == events
    weighted = ConfusionMatrix._from_counts(None, {(True, False): 0.5, (False, False): 0.0}, 3)
    assert weighted.labels == [False, True] and weighted.total_weight == 0.5
    assert "0.5" in weighted.classification_report(zero_division=0)
    with pytest.raises(ValueError, match="outside labels"):
        ConfusionMatrix._from_counts([0, 1], {(0, 2): 1.0}, 1)


def test_repr_and_labels_property():
    cm = ConfusionMatrix(["b", "a"]).update("a", "b")
    assert cm.labels == ["b", "a"]  # constructor order
    assert "ConfusionMatrix(labels=['b', 'a'])" in repr(cm)
    np.testing.assert_array_equal(cm.matrix(), [[0.0, 0.0], [1.0, 0.0]])


# ------------------------------------------------------------------------ dicts
def test_to_dict_is_json_safe_and_round_trips_labels_of_each_kind():
    for cm in (filled(), ConfusionMatrix().update_many([True, False], [True, True]),
               ConfusionMatrix(["x", "y"]).update("y", "x", 0.25), ConfusionMatrix([1.5, 2])):
        d = cm.to_dict()
        assert d["type"] == "ConfusionMatrix" and d["version"] == 1
        back = sm.from_dict(json.loads(json.dumps(d, allow_nan=False)))
        assert back == cm and back.labels == cm.labels
        assert ConfusionMatrix.from_dict(d) == cm


def _good():
    return filled().to_dict()


def _mutate(path, value):
    d = json.loads(json.dumps(_good()))
    target = d
    for key in path[:-1]:
        target = target[key]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


@pytest.mark.parametrize(
    "d",
    [
        _mutate(["state", "count"], -1),
        _mutate(["state", "count"], 1.5),
        _mutate(["state", "count"], True),
        _mutate(["state", "count"], 2),  # fewer events than cells
        _mutate(["state", "total_weight"], -1.0),
        _mutate(["state", "total_weight"], 99.0),  # disagrees with the cells
        _mutate(["state", "total_weight"], "4.5"),
        _mutate(["state", "unit_weights"], "yes"),
        _mutate(["state", "unit_weights"], True),  # cells are not unit counts
        _mutate(["state", "cells"], {"0": 1}),
        {"type": "ConfusionMatrix", "version": 1, "config": {"labels": None},  # unit but 0-weight cell
         "state": {"count": 2, "total_weight": 2.0, "unit_weights": True,
                   "cells": [[0, 0, 2.0], [0, 1, 0.0]]}},
        _mutate(["state", "cells", 0], [0, 0]),
        _mutate(["state", "cells", 0], [0, 0, -1.0]),
        _mutate(["state", "cells", 0], [[0], 0, 1.0]),
        _mutate(["state", "cells", 0], [None, 0, 1.0]),
        _mutate(["state", "cells", 0], ["a", 0, 1.0]),  # mixes kinds
        _mutate(["state", "cells", 1], [0, 0, 2.0]),  # repeats a cell
        _mutate(["state", "cells", 0], [0, 0, "__import__('os')"]),
        _mutate(["state", "extra"], 1),
        _mutate(["state", "cells"], KeyError),
        _mutate(["config", "labels"], [0, 1]),  # cells hold label 2
        _mutate(["config", "labels"], [0, 0, 1, 2]),
        _mutate(["config", "labels"], "012"),
        _mutate(["config", "bogus"], 1),
        _mutate(["version"], 2),
        _mutate(["type"], "os.system"),
        _mutate(["state"], [1, 2]),
    ],
)
def test_from_dict_rejects_malformed_dicts(d):
    with pytest.raises(ValueError):
        sm.from_dict(d)


def test_metrics_warn_with_the_user_warning_family():
    cm = ConfusionMatrix().update_many([0, 0], [0, 0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cm.f1(pos_label=1) == 0.0
    assert [w.category for w in caught] == [sm.UndefinedMetricWarning]
    assert issubclass(sm.UndefinedMetricWarning, UserWarning)


def test_from_counts_with_a_zero_weight_cell_is_not_unit_weights():
    # weights [0, 2]: the cells sum to the event count, yet they are not counts of unit-weight events
    cm = ConfusionMatrix._from_counts([0, 1], {(0, 0): 0.0, (1, 1): 2.0}, 2)
    assert cm.count == 2 and cm.total_weight == 2.0
    with pytest.warns(sm.UndefinedMetricWarning):  # label 0 has weight 0, as scikit-learn warns too
        report = cm.classification_report()
    assert "2.0" in report  # supports print as weights, as scikit-learn does
