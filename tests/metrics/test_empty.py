"""Empty accumulators behave as docs/guide/library.md's "Where streammetrics differs" says: scalar
metrics are NaN with an UndefinedMetricWarning that says why; curves and the text report
raise ValueError (as scikit-learn does on empty input)."""
import math
import warnings

import pytest

import streammetrics as sm
from streammetrics.core.exceptions import UndefinedMetricWarning


def _only_warning(fn, *args, **kwargs):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = fn(*args, **kwargs)
    assert caught and all(issubclass(w.category, UndefinedMetricWarning) for w in caught)
    return value, " ".join(str(w.message) for w in caught)


def test_empty_roc_auc_says_no_events_not_one_class():
    value, text = _only_warning(sm.BinaryScores().roc_auc)
    assert math.isnan(value) and "No event" in text and "one class" not in text.lower()
    assert all(math.isnan(v) for v in sm.BinaryScores().roc_auc_bounds())
    value, text = _only_warning(sm.BinaryScores().update(1, 0.3).roc_auc)
    assert math.isnan(value) and "Only one class" in text  # one class seen: scikit-learn's warning


@pytest.mark.parametrize("acc,metric", [
    (sm.BinaryScores(), "average_precision"), (sm.BinaryScores(), "log_loss"), (sm.BinaryScores(), "brier_score"),
    (sm.ConfusionMatrix(), "accuracy"), (sm.ConfusionMatrix(), "f1"), (sm.ConfusionMatrix(), "matthews_corrcoef"),
    (sm.MulticlassScores(["a", "b", "c"]), "log_loss"), (sm.MulticlassScores(["a", "b", "c"]), "roc_auc"),
    (sm.MultilabelScores(2), "roc_auc"), (sm.Regression(), "mse"), (sm.ScoreDistribution(), "mean_score"),
])
def test_empty_scalar_metrics_are_nan_with_a_warning(acc, metric):
    value, _ = _only_warning(getattr(acc, metric))
    assert math.isnan(value)


@pytest.mark.parametrize("fn", [
    sm.BinaryScores().roc_curve, sm.BinaryScores().precision_recall_curve,
    sm.BinaryScores().update(1, 0.4, 0.0).roc_curve,
    sm.ConfusionMatrix().classification_report, sm.ConfusionMatrix([0, 1]).classification_report,
])
def test_empty_curves_and_report_raise(fn):
    with pytest.raises(ValueError, match="event"):
        fn()
