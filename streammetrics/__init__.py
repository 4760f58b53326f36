"""streammetrics: incremental, mergeable model-quality metrics for prediction streams.

Every accumulator follows one protocol (see :mod:`streammetrics.core.accumulator`): ``update`` one
event, ``update_many`` a batch, ``merge`` another, ``copy``/``reset``, ``count`` and
``total_weight``, and a versioned JSON-safe ``to_dict`` that :func:`from_dict` reads back.

=========================  =====================================================
accumulator                what it gives
=========================  =====================================================
``ConfusionMatrix``        hard-label metrics (accuracy ... classification report)
``MultilabelConfusion``    the same for indicator rows (``average="samples"`` too)
``BinaryScores``           ROC AUC with guaranteed bounds, curves, AP, log loss, Brier
``MulticlassScores``       top-k accuracy, log loss, OvR/OvO ROC AUC, arg-max confusion
``MultilabelScores``       per-label ROC AUC and average precision, all averages
``Regression``             MSE, RMSE, MAE, R², RMSLE, MAPE, max error
``ScoreDistribution``      label-free: score histogram, mean score, predicted positive rate
=========================  =====================================================

Monitors (``BinaryMonitor``, ``MulticlassMonitor``, ``LabelMonitor``,
``RegressionMonitor``) bundle them per prediction task and take whole event dicts;
:mod:`streammetrics.stream.windows` runs them over event-time windows per stream key.
``Event`` is a parsed prediction event, ``Reference`` the labelled baseline of label-free metrics,
``SharedMonitor`` a monitor for the threads of a service and ``replay_frame`` the snapshots of a
pandas DataFrame (what ``streammetrics replay`` gives for a file).
"""
from streammetrics.core.accumulator import Accumulator, from_dict, registered_types
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.events.records import Event
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.metrics.multilabel_confusion import MultilabelConfusion
from streammetrics.metrics.multilabel_scores import MultilabelScores
from streammetrics.metrics.regression import Regression
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors import (
    BinaryMonitor,
    LabelMonitor,
    MulticlassMonitor,
    RegressionMonitor,
    make_monitor,
)
from streammetrics.monitors.reference import Reference
from streammetrics.monitors.shared import SharedMonitor
from streammetrics.stream.frames import replay_frame
from streammetrics.stream.windows import WindowManager

__version__ = "0.1.0"

__all__ = [
    "Accumulator", "from_dict", "registered_types", "__version__",
    "ConfusionMatrix", "MultilabelConfusion", "BinaryScores", "MulticlassScores", "MultilabelScores",
    "Regression", "ScoreDistribution", "UndefinedMetricWarning",
    "BinaryMonitor", "MulticlassMonitor", "LabelMonitor", "RegressionMonitor", "make_monitor",
    "SharedMonitor", "WindowManager", "Event", "Reference", "replay_frame",
]
