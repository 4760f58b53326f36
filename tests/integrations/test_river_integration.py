"""streammetrics.integrations.river: accumulators as river metrics, run by river itself
(progressive validation, utils.Rolling) on river's bundled datasets and checked against
scikit-learn on the same progressive predictions, and against river's own metrics."""
from __future__ import annotations

import ast
import importlib
import math
import pathlib
import sys
import warnings

import numpy as np
import pytest
from river import (
    anomaly,
    cluster,
    datasets,
    evaluate,
    linear_model,
    metrics,
    naive_bayes,
    preprocessing,
    utils,
)
from sklearn import metrics as skm

import streammetrics as sm
import streammetrics.integrations
from streammetrics.integrations.river import (
    F1,
    MAE,
    MAPE,
    MCC,
    MSE,
    R2,
    RMSE,
    RMSLE,
    ROCAUC,
    Accuracy,
    AveragePrecision,
    BalancedAccuracy,
    BinaryScoresMetric,
    BrierScore,
    CohenKappa,
    ConfusionMatrixMetric,
    CrossEntropy,
    FBeta,
    LogLoss,
    MacroF1,
    MulticlassROCAUC,
    MulticlassScoresMetric,
    Precision,
    Recall,
    RegressionMetric,
    RiverMetric,
    TopKAccuracy,
    WeightedF1,
)


class Collect(metrics.base.Metric):
    """Records what progressive validation feeds its metrics (y_true, y_pred)."""

    def __init__(self, requires_labels: bool = False, regression: bool = False) -> None:
        self._labels = requires_labels
        self._regression = regression
        self.events: list = []

    def update(self, y_true, y_pred, w=1.0):
        self.events.append((y_true, dict(y_pred) if isinstance(y_pred, dict) else y_pred))

    def revert(self, y_true, y_pred, w=1.0):
        raise NotImplementedError

    def get(self):
        return float(len(self.events))

    bigger_is_better = True

    @property
    def requires_labels(self):
        return self._labels

    def works_with(self, model):
        return True


def _classifier():
    return preprocessing.StandardScaler() | linear_model.LogisticRegression()


def _regressor():
    return preprocessing.StandardScaler() | linear_model.LinearRegression()


# ----------------------------------------------------------------------------- Phishing
@pytest.fixture(scope="module")
def phishing():
    ours = {
        "auc_exact": ROCAUC(sm.BinaryScores(exact=True)),
        "auc": ROCAUC(),
        "log_loss": LogLoss(),
        "brier": BrierScore(),
        "ap": AveragePrecision(sm.BinaryScores(exact=True)),
        "accuracy": Accuracy(),
        "f1": F1(),
        "precision": Precision(),
        "recall": Recall(),
        "mcc": MCC(),
    }
    theirs = {"auc": metrics.ROCAUC(), "log_loss": metrics.LogLoss(), "accuracy": metrics.Accuracy(),
              "f1": metrics.F1(), "mcc": metrics.MCC()}
    collect = Collect()
    combined = metrics.base.Metrics([*ours.values(), *theirs.values(), collect])
    evaluate.progressive_val_score(datasets.Phishing(), _classifier(), combined)
    y = np.array([e[0] for e in collect.events])
    proba = [e[1] for e in collect.events]
    p = np.array([d.get(True, 0.0) for d in proba])
    label = np.array([max(d, key=d.get) for d in proba])  # what Metrics gives label metrics
    return {"ours": ours, "theirs": theirs, "y": y, "p": p, "label": label, "proba": proba}


def test_phishing_progressive_auc_matches_sklearn(phishing):
    ours, theirs, y, p = phishing["ours"], phishing["theirs"], phishing["y"], phishing["p"]
    assert len(y) == 1250 and set(y) == {False, True}
    exact = skm.roc_auc_score(y, p)
    assert ours["auc_exact"].get() == pytest.approx(exact, abs=1e-12)
    binned = ours["auc"].get()
    low, high = ours["auc"].accumulator.roc_auc_bounds()
    assert low <= exact <= high
    assert abs(binned - exact) <= 1e-4
    # river's ROCAUC (10 thresholds) on the very same predictions is an approximation
    assert abs(theirs["auc"].get() - exact) < 0.02
    assert abs(theirs["auc"].get() - exact) > abs(binned - exact)
    assert ours["ap"].get() == pytest.approx(skm.average_precision_score(y, p), abs=1e-12)


def test_phishing_progressive_probability_and_label_metrics_match(phishing):
    ours, theirs, y, p, label = (phishing[k] for k in ("ours", "theirs", "y", "p", "label"))
    ll = skm.log_loss(y, p, labels=[False, True])
    assert ours["log_loss"].get() == pytest.approx(ll, rel=1e-12)
    assert theirs["log_loss"].get() == pytest.approx(ll, rel=1e-9)  # no probability near the clip
    assert ours["brier"].get() == pytest.approx(skm.brier_score_loss(y, p), rel=1e-12)
    for name, ref in [("accuracy", skm.accuracy_score(y, label)), ("f1", skm.f1_score(y, label)),
                      ("mcc", skm.matthews_corrcoef(y, label))]:
        assert ours[name].get() == pytest.approx(ref, abs=1e-12), name
        assert theirs[name].get() == pytest.approx(ref, abs=1e-12), name
    assert ours["precision"].get() == pytest.approx(skm.precision_score(y, label), abs=1e-12)
    assert ours["recall"].get() == pytest.approx(skm.recall_score(y, label), abs=1e-12)


def test_get_is_a_float_and_repr_like_river(phishing):
    auc = phishing["ours"]["auc_exact"]
    assert type(auc.get()) is float
    assert repr(auc) == f"ROCAUC: {auc.get():.4f}"
    assert str(phishing["ours"]["accuracy"]) == "Accuracy: 0.8928"
    generic = RiverMetric(sm.BinaryScores(), "log_loss")
    assert repr(generic) == "BinaryScores.log_loss: 0.0000"


# ----------------------------------------------------------------------------- Rolling
def _feed(metric, events):
    for y, proba in events:
        metric.update(y, proba)


@pytest.mark.parametrize("window", [1, 57, 300])
def test_rolling_equals_the_last_window(phishing, window):
    events = list(zip(phishing["y"].tolist(), phishing["proba"]))
    label_events = list(zip(phishing["y"].tolist(), phishing["label"].tolist()))
    auc = utils.Rolling(ROCAUC, window_size=window, accumulator=sm.BinaryScores(exact=True))
    ll = utils.Rolling(LogLoss, window_size=window)
    f1 = utils.Rolling(F1, window_size=window)
    acc = utils.Rolling(Accuracy, window_size=window)
    for i in range(len(events)):
        auc.update(*events[i])
        ll.update(*events[i])
        f1.update(*label_events[i])
        acc.update(*label_events[i])
        if i % 149 and i != len(events) - 1:
            continue
        lo = max(0, i + 1 - window)
        y, p, lab = phishing["y"][lo: i + 1], phishing["p"][lo: i + 1], phishing["label"][lo: i + 1]
        if len(set(y)) == 2:
            assert auc.get() == pytest.approx(skm.roc_auc_score(y, p), abs=1e-12)
        else:  # undefined: 0.0, as river's metrics
            assert auc.get() == 0.0
        assert ll.get() == pytest.approx(skm.log_loss(y, p, labels=[False, True]), rel=1e-11)
        expected = skm.f1_score(y, lab, labels=[True], average="micro", zero_division=0.0)
        assert f1.get() == pytest.approx(expected, abs=1e-12)
        assert acc.get() == pytest.approx(skm.accuracy_score(y, lab), abs=1e-12)
    # the wrapped accumulator holds exactly the window's events
    lo = len(events) - window
    fresh = sm.BinaryScores(exact=True).update_many(phishing["y"][lo:], phishing["p"][lo:])
    assert auc.obj.accumulator._neg == fresh._neg and auc.obj.accumulator._pos == fresh._pos
    assert auc.obj.accumulator.count == window


def test_rolling_inside_progressive_val_score(phishing):
    window = 250
    rolling = utils.Rolling(ROCAUC, window_size=window, accumulator=sm.BinaryScores(exact=True))
    evaluate.progressive_val_score(datasets.Phishing(), _classifier(), rolling)
    y, p = phishing["y"][-window:], phishing["p"][-window:]
    assert rolling.get() == pytest.approx(skm.roc_auc_score(y, p), abs=1e-12)
    theirs = utils.Rolling(metrics.ROCAUC, window_size=window)
    evaluate.progressive_val_score(datasets.Phishing(), _classifier(), theirs)
    assert abs(theirs.get() - rolling.get()) < 0.05  # river's own, approximate, on the same window


# ----------------------------------------------------------------------------- regression
@pytest.fixture(scope="module")
def trump():
    ours = {"mae": MAE(), "mse": MSE(), "rmse": RMSE(), "r2": R2(), "mape": MAPE(), "rmsle": RMSLE()}
    theirs = {"mae": metrics.MAE(), "mse": metrics.MSE(), "rmse": metrics.RMSE(), "r2": metrics.R2()}
    collect = Collect(regression=True)
    combined = metrics.base.Metrics([*ours.values(), *theirs.values(), collect])
    evaluate.progressive_val_score(datasets.TrumpApproval(), _regressor(), combined)
    yt = np.array([float(e[0]) for e in collect.events])
    yp = np.array([float(e[1]) for e in collect.events])
    return ours, theirs, yt, yp


def test_regression_progressive_matches_sklearn_and_river(trump):
    ours, theirs, yt, yp = trump
    assert len(yt) == 1001
    ref = {"mae": skm.mean_absolute_error(yt, yp), "mse": skm.mean_squared_error(yt, yp),
           "rmse": skm.root_mean_squared_error(yt, yp), "r2": skm.r2_score(yt, yp),
           "mape": skm.mean_absolute_percentage_error(yt, yp)}
    for name, value in ref.items():
        assert ours[name].get() == pytest.approx(value, rel=1e-9), name
        if name in theirs:
            assert theirs[name].get() == pytest.approx(value, rel=1e-9), name
    if (yp > -1).all():
        assert ours["rmsle"].get() == pytest.approx(skm.root_mean_squared_log_error(yt, yp), rel=1e-9)


@pytest.mark.parametrize("window", [2, 100])
def test_regression_rolling_matches_sklearn(trump, window):
    _, _, yt, yp = trump
    mae = utils.Rolling(MAE, window_size=window)
    r2 = utils.Rolling(R2, window_size=window)
    for i, (t, p) in enumerate(zip(yt.tolist(), yp.tolist())):
        mae.update(t, p)
        r2.update(t, p)
        if i % 97 == 0 and i >= window:
            a, b = yt[i + 1 - window: i + 1], yp[i + 1 - window: i + 1]
            assert mae.get() == pytest.approx(skm.mean_absolute_error(a, b), rel=1e-9)
            assert r2.get() == pytest.approx(skm.r2_score(a, b), rel=1e-7, abs=1e-9)


def test_revert_not_available_is_named():
    rolling = utils.Rolling(RiverMetric, window_size=2, accumulator=sm.Regression(), metric="max_error")
    rolling.update(1.0, 2.0)
    rolling.update(1.0, 3.0)
    with pytest.raises(NotImplementedError, match="max_error cannot be reverted"):
        rolling.update(1.0, 4.0)
    ce = CrossEntropy(["a", "b", "c"])
    ce.update("a", {"a": 0.5, "b": 0.5})
    with pytest.raises(NotImplementedError, match="MulticlassScores cannot remove events"):
        ce.revert("a", {"a": 0.5, "b": 0.5})


# ----------------------------------------------------------------------------- multiclass
def test_multiclass_progressive_matches_sklearn():
    classes = sorted({y for _, y in datasets.ImageSegments()})
    ce = CrossEntropy(classes, accumulator=sm.MulticlassScores(classes, exact=True))
    auc = MulticlassROCAUC(accumulator=ce.accumulator)  # shares the accumulator
    top2 = TopKAccuracy(accumulator=ce.accumulator, k=2)
    macro, weighted, bacc, kappa = MacroF1(), WeightedF1(), BalancedAccuracy(), CohenKappa()
    theirs = {"macro": metrics.MacroF1(), "ce": metrics.CrossEntropy()}
    collect = Collect()
    combined = metrics.base.Metrics([ce, macro, weighted, bacc, kappa, *theirs.values(), collect])
    model = preprocessing.StandardScaler() | naive_bayes.GaussianNB()
    evaluate.progressive_val_score(datasets.ImageSegments(), model, combined)
    y = [e[0] for e in collect.events]
    P = np.array([[d.get(c, 0.0) for c in classes] for _, d in collect.events])
    label = [max(d, key=d.get) for _, d in collect.events]
    assert ce.get() == pytest.approx(skm.log_loss(y, P, labels=classes), rel=1e-12)
    assert auc.get() == pytest.approx(skm.roc_auc_score(y, P, multi_class="ovr", labels=classes), abs=1e-12)
    assert top2.get() == pytest.approx(skm.top_k_accuracy_score(y, P, k=2, labels=classes), abs=1e-12)
    assert macro.get() == pytest.approx(skm.f1_score(y, label, average="macro"), abs=1e-12)
    assert theirs["macro"].get() == pytest.approx(macro.get(), abs=1e-12)
    assert weighted.get() == pytest.approx(skm.f1_score(y, label, average="weighted"), abs=1e-12)
    assert bacc.get() == pytest.approx(skm.balanced_accuracy_score(y, label), abs=1e-12)
    assert kappa.get() == pytest.approx(skm.cohen_kappa_score(y, label), abs=1e-12)


def test_multiclass_probability_dicts():
    m = CrossEntropy(["a", "b", "c"])
    m.update("b", {"b": 0.25, "a": 0.75})  # "c" missing: 0
    assert m.get() == pytest.approx(-math.log(0.25))
    m.update("c", {"a": 0.5, "b": 0.5, "z": 0.0})  # a class outside classes with 0 is harmless
    with pytest.raises(ValueError, match="'z'"):
        m.update("a", {"a": 0.5, "z": 0.5})
    with pytest.raises(ValueError, match="classes"):
        m.update("z", {"a": 1.0})
    assert m.accumulator.count == 2
    with pytest.raises(ValueError, match="differ"):
        CrossEntropy(["a", "b"], accumulator=sm.MulticlassScores(["a", "c"]))
    with pytest.raises(TypeError, match="needs classes"):
        CrossEntropy()


# ----------------------------------------------------------------------------- binary inputs
def test_binary_truth_and_score_conventions():
    m = BrierScore(sm.BinaryScores(exact=True))
    m.update(True, {False: 0.8})  # positive class missing: 1 - 0.8
    assert m.get() == pytest.approx(0.8**2)
    m.update(1, {0: 0.3, 1: 0.7})  # int labels match pos_val=True
    assert m.accumulator.count == 2 and m.accumulator._events == [0, 2]
    m.update(False, 0.1)  # a bare number is the positive score
    assert m.get() == pytest.approx((0.64 + 0.09 + 0.01) / 3)
    with pytest.raises(ValueError, match="empty dict"):
        m.update(True, {})
    with pytest.raises(TypeError, match="requires_labels is False"):
        m.update(True, True)
    with pytest.raises(ValueError, match="pos_val"):
        m.update("spam", {"spam": 0.9, "ham": 0.1})
    spam = ROCAUC(sm.BinaryScores(exact=True), pos_val="spam")
    for y, s in [("spam", 0.9), ("ham", 0.2), ("spam", 0.4), ("ham", 0.6)]:
        spam.update(y, {"spam": s, "ham": 1 - s})
    assert spam.get() == pytest.approx(skm.roc_auc_score([1, 0, 1, 0], [0.9, 0.2, 0.4, 0.6]))
    neg = ROCAUC(sm.BinaryScores(exact=True), pos_val=False)  # the positive class is False
    neg.update(False, {False: 0.7, True: 0.3})
    neg.update(True, {False: 0.2, True: 0.8})
    assert neg.get() == 1.0


def test_binary_weights_revert_and_margins():
    m = ROCAUC(sm.BinaryScores(exact=True))
    m.update(True, {True: 0.8}, w=2.0)
    m.update(False, {True: 0.3})
    assert m.accumulator.total_weight == 3.0
    with pytest.raises(ValueError, match="never added"):
        m.revert(True, {True: 0.7}, w=2.0)
    m.revert(True, {True: 0.8}, w=2.0)
    assert m.accumulator.total_weight == 1.0 and m.get() == 0.0  # one class: undefined
    ll = LogLoss()
    ll.update(True, 3.5)  # a margin: ROC AUC is fine, log loss is not
    with pytest.raises(ValueError, match="outside"):
        ll.get()


def test_undefined_values_and_no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ROCAUC().get() == 0.0 and LogLoss().get() == 0.0 and MAE().get() == 0.0
        assert math.isnan(ROCAUC(undefined=math.nan).get())
        one = ROCAUC()
        one.update(True, {True: 0.9})
        assert one.get() == 0.0
        f1 = F1()
        f1.update(False, False)  # no positive predicted or true: 0.0 as river's F1
        assert f1.get() == 0.0 == metrics.F1().get()
        mcc = MCC()
        mcc.update(True, True)  # one label: scikit-learn warns about the matrix shape
        assert mcc.get() == 0.0
        r2 = R2()
        r2.update(1.0, 2.0)
        assert r2.get() == 0.0


# ----------------------------------------------------------------------------- river protocol
def test_works_with_requires_labels_bigger_is_better():
    classifier = linear_model.LogisticRegression()
    regressor = linear_model.LinearRegression()
    detector = anomaly.HalfSpaceTrees()
    clusterer = cluster.KMeans()
    expectations = [
        # metric, bigger_is_better, requires_labels, works with (classifier, regressor, detector, clusterer)
        (ROCAUC(), True, False, (True, False, True, False)),
        (AveragePrecision(), True, False, (True, False, True, False)),
        (LogLoss(), False, False, (True, False, True, False)),
        (BrierScore(), False, False, (True, False, True, False)),
        (Accuracy(), True, True, (True, False, False, True)),
        (F1(), True, True, (True, False, False, True)),
        (FBeta(2.0), True, True, (True, False, False, True)),
        (MacroF1(), True, True, (True, False, False, True)),
        (MCC(), True, True, (True, False, False, True)),
        (CrossEntropy([0, 1, 2]), False, False, (True, False, False, False)),
        (MulticlassROCAUC([0, 1, 2]), True, False, (True, False, False, False)),
        (TopKAccuracy([0, 1, 2]), True, False, (True, False, False, False)),
        (MAE(), False, None, (False, True, False, False)),
        (MSE(), False, None, (False, True, False, False)),
        (RMSE(), False, None, (False, True, False, False)),
        (RMSLE(), False, None, (False, True, False, False)),
        (R2(), True, None, (False, True, False, False)),
    ]
    for metric, bigger, labels, works in expectations:
        name = type(metric).__name__
        assert isinstance(metric, metrics.base.Metric), name
        assert metric.bigger_is_better is bigger, name
        if labels is None:  # river's regression metrics have no requires_labels
            assert isinstance(metric, metrics.base.RegressionMetric), name
        else:
            assert metric.requires_labels is labels, name
        got = tuple(metric.works_with(m) for m in (classifier, regressor, detector, clusterer))
        assert got == works, name
    for name, lower in [("mse", True), ("rmse", True), ("mae", True), ("rmsle", True), ("mape", True),
                        ("max_error", True), ("r2", False)]:
        assert RiverMetric(sm.Regression(), name).bigger_is_better is not lower
    with pytest.raises(ValueError, match="not compatible"):
        evaluate.progressive_val_score(datasets.TrumpApproval(), _regressor(), ROCAUC())


def test_generic_constructor_dispatch_and_errors():
    assert type(RiverMetric(sm.BinaryScores(), "roc_auc")) is BinaryScoresMetric
    assert type(RiverMetric(sm.ConfusionMatrix(), metric="f1", average="macro")) is ConfusionMatrixMetric
    assert type(RiverMetric(accumulator=sm.MulticlassScores([1, 2]), metric="log_loss")) is MulticlassScoresMetric
    assert type(RiverMetric(sm.Regression(), "r2")) is RegressionMetric
    with pytest.raises(TypeError, match="accumulator must be one of"):
        RiverMetric(sm.MultilabelScores(["x", "y"]), "roc_auc")
    with pytest.raises(ValueError, match="metric must be the name"):
        RiverMetric(sm.BinaryScores(), "accuracy")
    with pytest.raises(TypeError, match="max_fpr"):
        RiverMetric(sm.BinaryScores(), "log_loss", max_fpr=0.5)
    with pytest.raises(ValueError, match="average=None"):
        RiverMetric(sm.ConfusionMatrix(), "f1", average=None)
    with pytest.raises(TypeError, match="must be a BinaryScores"):
        ROCAUC(sm.ConfusionMatrix())
    with pytest.raises(TypeError, match="undefined"):
        ROCAUC(undefined="zero")
    partial = ROCAUC(sm.BinaryScores(exact=True), max_fpr=0.5)
    for y, s in [(1, 0.9), (0, 0.2), (1, 0.4), (0, 0.6), (1, 0.7)]:
        partial.update(y, s)
    assert partial.get() == pytest.approx(skm.roc_auc_score([1, 0, 1, 0, 1], [0.9, 0.2, 0.4, 0.6, 0.7], max_fpr=0.5))


def test_clone_and_shared_accumulator():
    acc = sm.ConfusionMatrix(labels=["a", "b"])
    f = RiverMetric(acc, "fbeta", beta=0.5, average="macro", zero_division=0.0)
    f.update("a", "b")
    assert acc.count == 1  # the wrapper updates the accumulator it was given
    c = f.clone()
    assert type(c) is ConfusionMatrixMetric and c.accumulator is not acc
    assert c.accumulator.count == 0 and c.accumulator.labels == ["a", "b"]
    assert c.metric_kwargs == f.metric_kwargs and acc.count == 1
    assert f.clone(include_attributes=True).accumulator.count == 1
    roc = ROCAUC(pos_val="yes", max_fpr=0.3)
    roc.update("yes", {"yes": 0.6})
    twin = roc.clone()
    assert type(twin) is ROCAUC and twin.pos_val == "yes" and twin.max_fpr == 0.3
    assert twin.accumulator.count == 0 and roc.accumulator.count == 1
    top = TopKAccuracy([1, 2, 3], k=1).clone()
    assert top.k == 1 and top.classes == [1, 2, 3]
    both = ROCAUC() + LogLoss()
    assert isinstance(both, metrics.base.Metrics) and both.requires_labels is False


# ----------------------------------------------------------------------------- river is optional
def test_missing_river_gives_install_hint(monkeypatch):
    monkeypatch.setitem(sys.modules, "river", None)  # makes `import river` fail
    monkeypatch.delitem(sys.modules, "streammetrics.integrations.river")
    monkeypatch.delattr(streammetrics.integrations, "river")
    with pytest.raises(ImportError, match=r"pip install 'streammetrics\[river\]'"):
        importlib.import_module("streammetrics.integrations.river")
    importlib.reload(streammetrics.integrations)  # the package itself needs no river


def test_only_the_integration_imports_river():
    root = pathlib.Path(sm.__file__).parent
    offenders = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            if any(n == "river" or n.startswith("river.") for n in names):
                offenders.append(path.relative_to(root).as_posix())
    assert sorted(set(offenders)) == ["integrations/river.py"]
