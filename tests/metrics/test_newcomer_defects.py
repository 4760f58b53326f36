"""Small defects a new user meets: pos_label, one-element array scores, sum() of accumulators."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from sklearn.metrics import log_loss, roc_auc_score

import streammetrics as sm


@pytest.mark.parametrize("y,pos", [(["yes", "no", "yes", "no", "no", "yes"], "yes"),
                                   ([1, -1, 1, -1, -1, 1], 1), (np.array([2, 7, 2, 7, 7, 2]), 2)])
def test_pos_label_as_scikit_learn(y, pos):
    s = [0.9, 0.2, 0.4, 0.5, 0.1, 0.35]
    batch = sm.BinaryScores(pos_label=pos).update_many(y, s)
    one = sm.BinaryScores(pos_label=pos)
    for label, score in zip(y, s):
        one.update(label, score)
    assert one == batch
    assert batch.roc_auc() == pytest.approx(roc_auc_score(np.asarray(y) == pos, s), abs=1e-12)
    assert batch.log_loss() == pytest.approx(log_loss(np.asarray(y) == pos, s), abs=1e-12)
    if pos != 2:  # scikit-learn picks the positive class itself for these
        assert batch.roc_auc() == pytest.approx(roc_auc_score(y, s), abs=1e-12)
    for again in (batch.copy(), sm.from_dict(batch.to_dict()), pickle.loads(pickle.dumps(batch))):
        assert again == batch and again.pos_label == pos
        again.update(y[0], 0.3)  # still reads labels by pos_label
        assert again.count == 7
        want = batch.copy()
        want.update_many([y[0]], [0.3])
        assert again == want
    assert sum([batch, one]).count == 12


def test_pos_label_config_and_errors():
    assert "pos_label" not in sm.BinaryScores().to_dict()["config"]  # default states unchanged
    with pytest.raises(ValueError, match="different configurations"):
        sm.BinaryScores(pos_label="yes").merge(sm.BinaryScores())
    with pytest.raises(TypeError, match="pos_label must be"):
        sm.BinaryScores(pos_label=0.5)
    with pytest.raises(ValueError, match=r"y_true must be 0, 1, True or False, got -1 \(other labels: give pos_label="):
        sm.BinaryScores().update(-1, 0.5)
    b = sm.BinaryScores(pos_label="yes").update("yes", 0.5)
    with pytest.raises((TypeError, ValueError), match=r"y_true\[1\] must be"):
        b.update_many(["no", None], [0.1, 0.2])
    assert b.count == 1  # the batch changed nothing
    b.remove("yes", 0.5)
    assert b.count == 0


def test_one_element_array_score():
    direct = sm.BinaryScores().update(1, np.array([0.7])).update(0, np.array([[0.2]]))
    assert direct == sm.BinaryScores().update(1, 0.7).update(0, 0.2)
    monitor = sm.BinaryMonitor().update({"y_true": 1, "score": np.array([0.7])})
    assert monitor.snapshot() == sm.BinaryMonitor().update({"y_true": 1, "score": 0.7}).snapshot()
    with pytest.raises(ValueError, match="'score'"):
        sm.BinaryMonitor().update({"y_true": 1, "score": np.array([0.7, 0.1])})
    with pytest.raises(TypeError, match="score must be a real number"):
        sm.BinaryScores().update(1, np.array([0.7, 0.1]))


def _filled():
    return [
        sm.ConfusionMatrix().update(1, 0), sm.BinaryScores().update(1, 0.3),
        sm.MulticlassScores(["a", "b"]).update("a", [0.4, 0.6]), sm.Regression().update(1.0, 2.0),
        sm.MultilabelScores(["x", "y"]).update([1, 0], [0.3, 0.1]), sm.ScoreDistribution().update(0.4),
        sm.MultilabelConfusion(["x", "y"]).update([1, 0], [1, 1]),
        sm.BinaryMonitor().update({"y_true": 1, "score": 0.9}),
        sm.RegressionMonitor().update({"y_true": 1.0, "y_pred": 0.5}),
        sm.MulticlassMonitor(["a", "b"]).update({"y_true": "b", "scores": [0.1, 0.9]}),
        sm.LabelMonitor().update({"y_true": "a", "y_pred": "b"}),
    ]


@pytest.mark.parametrize("acc", _filled(), ids=lambda a: type(a).__name__)
def test_sum_of_accumulators(acc):
    other = acc.copy()
    total = sum([acc, other])  # starts from 0: 0 + acc
    assert total == acc + other and total.count == 2 * acc.count
    assert (0 + acc) == acc and (0 + acc) is not acc
    assert sum([acc]) == acc
    with pytest.raises(TypeError):
        1 + acc
    with pytest.raises(TypeError):
        "x" + acc
