"""streammetrics accumulators as river metrics (``pip install 'streammetrics[river]'``).

:class:`RiverMetric` wraps an accumulator and the name of one of its metric methods
as a ``river.metrics.base.Metric`` (``update``, ``revert``, ``get``, ``works_with``,
``bigger_is_better``, ``requires_labels``), so it drops into
``river.evaluate.progressive_val_score``, ``river.utils.Rolling`` and river's model
selection like any river metric::

    from river import datasets, evaluate, linear_model, utils
    import streammetrics as sm
    from streammetrics.integrations.river import ROCAUC, RiverMetric

    evaluate.progressive_val_score(datasets.Phishing(), linear_model.LogisticRegression(),
                                   ROCAUC() + RiverMetric(sm.BinaryScores(exact=True), "log_loss"))
    rolling_auc = utils.Rolling(ROCAUC, window_size=500)   # needs revert: remove()

The river base class follows the accumulator:

===================  ========================  ===================  ==========================
accumulator          river base                ``y_pred``           ``works_with``
===================  ========================  ===================  ==========================
BinaryScores         ``BinaryMetric``          probability dict     classifiers, anomaly
                     (``requires_labels``      ``{label: p}`` or a  detectors and filters
                     False)                    number (a score)
ConfusionMatrix      ``MultiClassMetric``      a label              classifiers, clusterers
MulticlassScores     ``MultiClassMetric``      probability dict     classifiers
                     (``requires_labels``      over ``classes``
                     False)
Regression           ``RegressionMetric``      a number             regressors
===================  ========================  ===================  ==========================

Binary truth is ``y_true == pos_val`` (river's convention; default ``True``, which also matches
0/1); the positive score is ``y_pred[pos_val]``, or ``1 - sum(other probabilities)`` clipped to
[0, 1] when a river model has not seen ``pos_val`` yet. ``get()`` returns ``undefined`` (default
``0.0``, as river's own metrics) where the accumulator's value is nan, so river's model selection
keeps comparing numbers; ``revert`` calls the accumulator's ``remove``. The wrapper updates the
accumulator it was given: read its other metrics through :attr:`RiverMetric.accumulator`.
"""
from __future__ import annotations

import inspect
import math
import warnings
from typing import Any, ClassVar, Hashable, Mapping, Sequence

import numpy as np

try:
    from river import base as _river_base
    from river.metrics import base as _river_metrics
except ImportError as exc:  # pragma: no cover - exercised by simulating a missing river
    raise ImportError(
        "streammetrics.integrations.river needs the river package, which is not installed: "
        "pip install 'streammetrics[river]'"
    ) from exc

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.metrics.regression import Regression

__all__ = [
    "RiverMetric",
    "BinaryScoresMetric",
    "ConfusionMatrixMetric",
    "MulticlassScoresMetric",
    "RegressionMetric",
    # binary scores
    "ROCAUC", "LogLoss", "BrierScore", "AveragePrecision",
    # labels
    "Accuracy", "BalancedAccuracy", "Precision", "Recall", "F1", "FBeta", "MacroF1",
    "WeightedF1", "MCC", "CohenKappa",
    # multiclass scores
    "CrossEntropy", "MulticlassROCAUC", "TopKAccuracy",
    # regression
    "MAE", "MSE", "RMSE", "R2", "RMSLE", "MAPE",
]


class RiverMetric(_river_metrics.Metric):
    """A streammetrics accumulator and one of its metric methods as a river metric.

    ``RiverMetric(accumulator, metric, undefined=0.0, **metric_kwargs)`` returns the
    subclass for the accumulator's type (:class:`BinaryScoresMetric`,
    :class:`ConfusionMatrixMetric`, :class:`MulticlassScoresMetric` or
    :class:`RegressionMetric`); ``get()`` is ``accumulator.<metric>(**metric_kwargs)``
    as a float (``undefined`` where that is nan). ``metric_kwargs`` are checked against
    the method's signature; ``average=None`` (one value per class) is refused.
    """

    #: accumulator type of the subclass
    accumulator_type: ClassVar[type[Accumulator]] = Accumulator
    #: metric method name -> bigger_is_better
    metrics: ClassVar[dict[str, bool]] = {}
    #: metric methods that revert cannot undo
    irreversible: ClassVar[frozenset[str]] = frozenset()
    #: format of the value in ``repr``: ``ROCAUC: 0.9123``
    _fmt = ".4f"

    def __new__(cls, *args: Any, **kwargs: Any) -> "RiverMetric":
        if cls is RiverMetric:
            accumulator = args[0] if args else kwargs.get("accumulator")
            cls = _subclass_for(accumulator)
        return super().__new__(cls)

    def __init__(
        self,
        accumulator: Accumulator | None = None,
        metric: str | None = None,
        undefined: float = 0.0,
        **metric_kwargs: Any,
    ) -> None:
        if accumulator is None:
            accumulator = self._default_accumulator()
        if not isinstance(accumulator, self.accumulator_type):
            raise TypeError(
                f"accumulator must be a {self.accumulator_type.__name__} for "
                f"{type(self).__name__}, got {type(accumulator).__name__}"
            )
        if not isinstance(metric, str) or metric not in self.metrics:
            raise ValueError(
                f"metric must be the name of a {self.accumulator_type.__name__} metric method, "
                f"one of {sorted(self.metrics)}; got {metric!r}"
            )
        method = getattr(accumulator, metric)
        try:
            inspect.signature(method).bind(**metric_kwargs)
        except TypeError as exc:
            raise TypeError(
                f"metric_kwargs {sorted(metric_kwargs)} do not fit "
                f"{self.accumulator_type.__name__}.{metric}{inspect.signature(method)}: {exc}"
            ) from None
        if "average" in metric_kwargs and metric_kwargs["average"] is None:
            raise ValueError(
                f"average=None makes {metric} one value per class; a river metric needs one "
                "number: pass average='macro', 'weighted', ..."
            )
        if undefined.__class__ is bool or not isinstance(undefined, (int, float)):
            raise TypeError(f"undefined must be a float (e.g. 0.0 or math.nan), got {undefined!r}")
        self.accumulator = accumulator
        self.metric = metric
        self.undefined = float(undefined)
        self.metric_kwargs = dict(metric_kwargs)

    def _default_accumulator(self) -> Accumulator:
        raise TypeError(f"{type(self).__name__} needs an accumulator")

    # ------------------------------------------------------------- river protocol
    def update(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:
        """Add one event to the accumulator."""
        if w == 1.0:
            self.accumulator.update(y_true, y_pred)
        else:
            self.accumulator.update(y_true, y_pred, w)

    def revert(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:
        """Remove one event added by :meth:`update` (``accumulator.remove``)."""
        self._check_reversible()
        self.accumulator.remove(y_true, y_pred, w)  # type: ignore[attr-defined]

    def _check_reversible(self) -> None:
        if not hasattr(self.accumulator, "remove"):
            raise NotImplementedError(
                f"{type(self.accumulator).__name__} cannot remove events, so "
                f"{type(self).__name__}.revert (needed by river's utils.Rolling) is not available"
            )
        if self.metric in self.irreversible:
            raise NotImplementedError(
                f"{type(self.accumulator).__name__}.{self.metric} cannot be reverted: "
                "removing an event does not tell the metric of the events that remain"
            )

    def get(self) -> float:
        """The metric of the events seen as a float; ``undefined`` (default 0.0, as river's
        metrics) where the accumulator's value is nan."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            warnings.filterwarnings("ignore", "A single label was found", UserWarning)
            value = getattr(self.accumulator, self.metric)(**self.metric_kwargs)
        value = float(value)
        return self.undefined if math.isnan(value) else value

    @property
    def bigger_is_better(self) -> bool:
        """True for scores (AUC, accuracy, F1, R²...), False for losses (log loss, MSE...)."""
        return self.metrics[self.metric]

    def works_with(self, model: Any) -> bool:  # pragma: no cover - overridden
        raise NotImplementedError

    # ------------------------------------------------------------------ helpers
    @property
    def name(self) -> str:
        """The class name for the convenience classes (``ROCAUC``), else
        ``"<Accumulator>.<metric>"``."""
        if type(self) in _GENERIC:
            return f"{type(self.accumulator).__name__}.{self.metric}"
        return type(self).__name__

    def __repr__(self) -> str:
        return f"{self.name}: {self.get():{self._fmt}}"

    def clone(self, new_params: dict[str, Any] | None = None, include_attributes: bool = False) -> "RiverMetric":
        """A wrapper with the same parameters on an empty copy of the accumulator (with
        ``include_attributes``: on a copy holding the same events)."""
        params = self._get_params()
        acc = self.accumulator.copy()
        params["accumulator"] = acc if include_attributes else acc.reset()
        params.update(new_params or {})
        return type(self)(**params)


class BinaryScoresMetric(RiverMetric, _river_metrics.BinaryMetric):
    """A :class:`~streammetrics.BinaryScores` metric (``roc_auc``, ``average_precision``,
    ``log_loss``, ``brier_score``) on river's probability dicts (``requires_labels`` is
    False). ``y_true == pos_val`` is the truth; the score is ``y_pred[pos_val]``, or
    ``1 - sum(other probabilities)`` (clipped to [0, 1]) when the dict lacks ``pos_val``,
    or ``y_pred`` itself when it is a number (e.g. an anomaly score)."""

    accumulator_type = BinaryScores
    metrics = {"roc_auc": True, "average_precision": True, "log_loss": False, "brier_score": False}

    def __init__(
        self,
        accumulator: BinaryScores | None = None,
        metric: str | None = None,
        pos_val: Hashable = True,
        undefined: float = 0.0,
        **metric_kwargs: Any,
    ) -> None:
        super().__init__(accumulator, metric, undefined, **metric_kwargs)
        self.pos_val = pos_val

    def _default_accumulator(self) -> Accumulator:
        return BinaryScores()

    def _truth(self, y_true: Any) -> bool:
        pos = self.pos_val
        if pos is True:
            if y_true is True or y_true is False:
                return y_true
            if y_true == 1:
                return True
            if y_true == 0:
                return False
            raise ValueError(
                f"y_true={y_true!r} is not a bool or 0/1 label: pass pos_val=<the positive "
                "label> to choose the positive class"
            )
        return bool(y_true == pos)

    def _score(self, y_pred: Any) -> Any:
        if isinstance(y_pred, Mapping):
            p = y_pred.get(self.pos_val)
            if p is None:
                if not y_pred:
                    raise ValueError(
                        f"y_pred is an empty dict: no probability for pos_val={self.pos_val!r}"
                    )
                p = 1.0 - math.fsum(y_pred.values())
                p = 0.0 if p < 0.0 else 1.0 if p > 1.0 else p
            return p
        if isinstance(y_pred, (bool, np.bool_)):
            raise TypeError(
                f"y_pred must be a dict of class probabilities or a number (a score), got the "
                f"label {y_pred!r}: {type(self).__name__}.requires_labels is False"
            )
        return y_pred

    def update(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:
        """Add one event: truth ``y_true == pos_val``, score from ``y_pred``."""
        if w == 1.0:
            self.accumulator.update(self._truth(y_true), self._score(y_pred))
        else:
            self.accumulator.update(self._truth(y_true), self._score(y_pred), w)

    def revert(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:
        """Remove one event added by :meth:`update` (``BinaryScores.remove``)."""
        self._check_reversible()
        self.accumulator.remove(self._truth(y_true), self._score(y_pred), w)  # type: ignore[attr-defined]  # _check_reversible: BinaryScores

    @property
    def requires_labels(self) -> bool:
        """False: ``y_pred`` is a probability dict (river calls ``predict_proba_one``)."""
        return False

    def works_with(self, model: Any) -> bool:
        """Classifiers, anomaly detectors and anomaly filters (as river's ``ROCAUC``)."""
        return isinstance(
            model, (_river_base.Classifier, _river_base.AnomalyDetector, _river_base.AnomalyFilter)
        )


class ConfusionMatrixMetric(RiverMetric, _river_metrics.MultiClassMetric):
    """A :class:`~streammetrics.ConfusionMatrix` metric of hard labels (multiclass
    capable; ``requires_labels`` is True): ``accuracy``, ``balanced_accuracy``,
    ``precision``, ``recall``, ``f1``, ``fbeta``, ``jaccard``, ``specificity``,
    ``matthews_corrcoef``, ``cohen_kappa`` with scikit-learn's keyword arguments."""

    accumulator_type = ConfusionMatrix
    metrics = {
        "accuracy": True, "balanced_accuracy": True, "precision": True, "recall": True,
        "f1": True, "fbeta": True, "jaccard": True, "specificity": True,
        "matthews_corrcoef": True, "cohen_kappa": True,
    }

    def _default_accumulator(self) -> Accumulator:
        return ConfusionMatrix()

    def works_with(self, model: Any) -> bool:
        """Classifiers and clusterers (as river's multiclass metrics)."""
        return isinstance(model, (_river_base.Classifier, _river_base.Clusterer))


class MulticlassScoresMetric(RiverMetric, _river_metrics.MultiClassMetric):
    """A :class:`~streammetrics.MulticlassScores` metric (``log_loss``, ``roc_auc``,
    ``average_precision``, ``top_k_accuracy``) on river's probability dicts
    (``requires_labels`` is False). Classes missing from a dict score 0; a class not in
    the accumulator's ``classes`` with a non-zero probability raises ``ValueError``.
    ``MulticlassScores`` cannot remove events, so ``revert`` raises
    ``NotImplementedError``."""

    accumulator_type = MulticlassScores
    metrics = {"log_loss": False, "roc_auc": True, "average_precision": True, "top_k_accuracy": True}

    def _row(self, y_pred: Any) -> Any:
        if not isinstance(y_pred, Mapping):
            return y_pred  # a sequence aligned with classes: validated by the accumulator
        classes = self.accumulator.classes  # type: ignore[attr-defined]
        if len(y_pred) > len(classes) or any(c not in y_pred for c in classes):
            known = set(classes)
            extra = [c for c, p in y_pred.items() if c not in known and p]
            if extra:
                raise ValueError(
                    f"y_pred gives probability to {extra!r}, not among the accumulator's "
                    f"classes {classes!r}"
                )
        return [y_pred.get(c, 0.0) for c in classes]

    def update(self, y_true: Any, y_pred: Any, w: float = 1.0) -> None:
        """Add one event: ``y_pred`` a dict class -> probability (or a row aligned with
        ``classes``)."""
        if w == 1.0:
            self.accumulator.update(y_true, self._row(y_pred))
        else:
            self.accumulator.update(y_true, self._row(y_pred), w)

    @property
    def requires_labels(self) -> bool:
        """False: ``y_pred`` is a probability dict (river calls ``predict_proba_one``)."""
        return False

    def works_with(self, model: Any) -> bool:
        """Classifiers."""
        return isinstance(model, _river_base.Classifier)


class RegressionMetric(RiverMetric, _river_metrics.RegressionMetric):
    """A :class:`~streammetrics.Regression` metric (``mse``, ``rmse``, ``mae``, ``r2``,
    ``rmsle``, ``mape``, ``max_error``) of numeric predictions. ``max_error`` cannot be
    reverted."""

    accumulator_type = Regression
    metrics = {
        "mse": False, "rmse": False, "mae": False, "r2": True, "rmsle": False, "mape": False,
        "max_error": False,
    }
    irreversible = frozenset({"max_error"})

    def _default_accumulator(self) -> Accumulator:
        return Regression()

    def works_with(self, model: Any) -> bool:
        """Regressors."""
        return isinstance(model, _river_base.Regressor)


_GENERIC = (BinaryScoresMetric, ConfusionMatrixMetric, MulticlassScoresMetric, RegressionMetric)


def _subclass_for(accumulator: Any) -> type[RiverMetric]:
    for cls in _GENERIC:
        if isinstance(accumulator, cls.accumulator_type):
            return cls
    raise TypeError(
        "accumulator must be one of "
        f"{[c.accumulator_type.__name__ for c in _GENERIC]} to make a river metric, "
        f"got {type(accumulator).__name__}"
    )


# ----------------------------------------------------------------------------- binary scores
class ROCAUC(BinaryScoresMetric):
    """ROC AUC of the positive-class probability (``BinaryScores.roc_auc``; tied and
    same-bin pairs count half). ``max_fpr``: McClish-standardised partial AUC."""

    def __init__(self, accumulator: BinaryScores | None = None, pos_val: Hashable = True,
                 max_fpr: float | None = None, undefined: float = 0.0) -> None:
        kwargs = {} if max_fpr is None else {"max_fpr": max_fpr}
        super().__init__(accumulator, "roc_auc", pos_val, undefined, **kwargs)
        self.max_fpr = max_fpr


class _BinaryConvenience(BinaryScoresMetric):
    _metric = ""

    def __init__(self, accumulator: BinaryScores | None = None, pos_val: Hashable = True,
                 undefined: float = 0.0) -> None:
        super().__init__(accumulator, self._metric, pos_val, undefined)


class AveragePrecision(_BinaryConvenience):
    """Average precision, scikit-learn's step sum (``BinaryScores.average_precision``)."""

    _metric = "average_precision"


class LogLoss(_BinaryConvenience):
    """Mean of ``-log p`` of the true class, clipped at float64 eps as scikit-learn
    (river's ``LogLoss`` clips at 1e-15) (``BinaryScores.log_loss``)."""

    _metric = "log_loss"


class BrierScore(_BinaryConvenience):
    """Mean of ``(y - p)**2`` (``BinaryScores.brier_score``)."""

    _metric = "brier_score"


# ----------------------------------------------------------------------------- labels
class _PositiveClassMetric(ConfusionMatrixMetric):
    """Precision/recall/F-beta of the class ``pos_val`` against the rest: scikit-learn's
    ``labels=[pos_val], average="micro"``, which equals ``average="binary"`` for two
    labels and, like river's binary metrics, also works with more; 0.0 where it divides
    by zero (river's convention, scikit-learn's ``zero_division=0.0``)."""

    _metric = ""

    def __init__(self, accumulator: ConfusionMatrix | None = None, pos_val: Hashable = True,
                 undefined: float = 0.0) -> None:
        super().__init__(accumulator, self._metric, undefined, labels=[pos_val], average="micro",
                         zero_division=0.0)
        self.pos_val = pos_val


class Precision(_PositiveClassMetric):
    """tp / (tp + fp) of the class ``pos_val``."""

    _metric = "precision"


class Recall(_PositiveClassMetric):
    """tp / (tp + fn) of the class ``pos_val``."""

    _metric = "recall"


class F1(_PositiveClassMetric):
    """2 tp / (2 tp + fp + fn) of the class ``pos_val``."""

    _metric = "f1"


class FBeta(ConfusionMatrixMetric):
    """(1 + b²) tp / ((1 + b²) tp + b² fn + fp) of the class ``pos_val`` (see :class:`F1`)."""

    def __init__(self, beta: float, accumulator: ConfusionMatrix | None = None,
                 pos_val: Hashable = True, undefined: float = 0.0) -> None:
        super().__init__(accumulator, "fbeta", undefined, beta=beta, labels=[pos_val],
                         average="micro", zero_division=0.0)
        self.beta = beta
        self.pos_val = pos_val


class _LabelConvenience(ConfusionMatrixMetric):
    _metric = ""
    _kwargs: ClassVar[dict[str, Any]] = {}

    def __init__(self, accumulator: ConfusionMatrix | None = None, undefined: float = 0.0) -> None:
        super().__init__(accumulator, self._metric, undefined, **self._kwargs)


class MacroF1(_LabelConvenience):
    """Unweighted mean of the per-class F1 over the labels seen (zero_division 0.0)."""

    _metric, _kwargs = "f1", {"average": "macro", "zero_division": 0.0}


class WeightedF1(_LabelConvenience):
    """Per-class F1 averaged with the classes' true weights (zero_division 0.0)."""

    _metric, _kwargs = "f1", {"average": "weighted", "zero_division": 0.0}


class Accuracy(_LabelConvenience):
    """Weighted share of events with ``y_true == y_pred``."""

    _metric = "accuracy"


class BalancedAccuracy(_LabelConvenience):
    """Mean recall over the classes present in ``y_true``."""

    _metric = "balanced_accuracy"


class MCC(_LabelConvenience):
    """Matthews correlation coefficient (multiclass R_K statistic)."""

    _metric = "matthews_corrcoef"


class CohenKappa(_LabelConvenience):
    """Cohen's kappa (p_o - p_e) / (1 - p_e)."""

    _metric = "cohen_kappa"


# ----------------------------------------------------------------------------- multiclass
class _MulticlassConvenience(MulticlassScoresMetric):
    def _init(self, classes: Sequence[Hashable] | None, accumulator: MulticlassScores | None) -> MulticlassScores:
        if accumulator is None:
            if classes is None:
                raise TypeError(f"{type(self).__name__} needs classes (or an accumulator)")
            accumulator = MulticlassScores(classes)
        elif classes is not None and list(classes) != accumulator.classes:
            raise ValueError(f"classes {list(classes)!r} differ from the accumulator's {accumulator.classes!r}")
        self.classes = list(accumulator.classes)
        return accumulator


class CrossEntropy(_MulticlassConvenience):
    """Multiclass log loss: mean of ``-log p`` of the true class (float64 eps clipping)."""

    def __init__(self, classes: Sequence[Hashable] | None = None,
                 accumulator: MulticlassScores | None = None, undefined: float = 0.0) -> None:
        super().__init__(self._init(classes, accumulator), "log_loss", undefined)


class MulticlassROCAUC(_MulticlassConvenience):
    """One-vs-rest or one-vs-one (Hand & Till) ROC AUC, ``average`` "macro" or "weighted"."""

    def __init__(self, classes: Sequence[Hashable] | None = None,
                 accumulator: MulticlassScores | None = None, multi_class: str = "ovr",
                 average: str = "macro", undefined: float = 0.0) -> None:
        super().__init__(self._init(classes, accumulator), "roc_auc", undefined,
                         multi_class=multi_class, average=average)
        self.multi_class = multi_class
        self.average = average


class TopKAccuracy(_MulticlassConvenience):
    """Weighted share of events whose true class is among the ``k`` highest probabilities."""

    def __init__(self, classes: Sequence[Hashable] | None = None,
                 accumulator: MulticlassScores | None = None, k: int = 2,
                 undefined: float = 0.0) -> None:
        super().__init__(self._init(classes, accumulator), "top_k_accuracy", undefined, k=k)
        self.k = k


# ----------------------------------------------------------------------------- regression
class _RegressionConvenience(RegressionMetric):
    _metric = ""

    def __init__(self, accumulator: Regression | None = None, undefined: float = 0.0) -> None:
        super().__init__(accumulator, self._metric, undefined)


class MAE(_RegressionConvenience):
    """Mean absolute error Σw·|y - ŷ| / Σw."""

    _metric = "mae"


class MSE(_RegressionConvenience):
    """Mean squared error Σw·(y - ŷ)² / Σw."""

    _metric = "mse"


class RMSE(_RegressionConvenience):
    """√MSE."""

    _metric = "rmse"


class R2(_RegressionConvenience):
    """Coefficient of determination 1 - Σw·(y - ŷ)² / Σw·(y - ȳ)²."""

    _metric = "r2"


class RMSLE(_RegressionConvenience):
    """√(Σw·(log1p y - log1p ŷ)² / Σw)."""

    _metric = "rmsle"


class MAPE(_RegressionConvenience):
    """Σw·|y - ŷ| / max(|y|, eps) / Σw: a fraction as scikit-learn's (river's ``MAPE`` is
    a percentage, 100 times larger)."""

    _metric = "mape"
