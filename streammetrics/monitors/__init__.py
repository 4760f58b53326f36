"""Monitors: one object per stream key bundling the accumulators of a prediction task.

A monitor takes whole prediction events (contract section 2) and reports every metric its
task supports in one JSON-safe ``snapshot()`` (``None`` where a metric is undefined).
Monitors follow the accumulator protocol, so windows merge them pane by pane and
checkpoints store them with ``to_dict``.

Each monitor has a **label-free part** over every prediction (``update_prediction`` /
``update_predictions``; ``count`` counts these) and a **label-based part** over the
predictions whose label is known (``update_outcome`` / ``update_outcomes``; ``labeled``
counts these); ``update_event`` / ``update_events`` feed both (a prediction with its
label), ``update(event_dict)`` / ``update_many`` parse dicts first. See
:mod:`streammetrics.monitors.base`.

=====================  ==========================================  ======================================
monitor                label-free part                             label-based part
=====================  ==========================================  ======================================
``BinaryMonitor``      ``ScoreDistribution`` (mean score,          ``BinaryScores`` (AUC and bounds, AP,
                       predicted positive rate, score histogram)   log loss, Brier) and the
                                                                   ``ConfusionMatrix`` of
                                                                   ``score >= threshold``
``MulticlassMonitor``  predicted-class weights, per-class mean     ``MulticlassScores`` (top-k, log loss,
                       score                                       OvR AUC, arg-max confusion)
``LabelMonitor``       predicted-label weights                     ``ConfusionMatrix`` of hard labels
``RegressionMonitor``  mean prediction                             ``Regression``
=====================  ==========================================  ======================================
"""
from __future__ import annotations

from typing import Hashable, Sequence

from streammetrics.monitors.base import Monitor, json_number
from streammetrics.monitors.binary import BinaryMonitor
from streammetrics.monitors.labels import LabelMonitor
from streammetrics.monitors.multiclass import MulticlassMonitor
from streammetrics.monitors.regression import RegressionMonitor

__all__ = ["Monitor", "BinaryMonitor", "MulticlassMonitor", "LabelMonitor", "RegressionMonitor",
           "make_monitor", "json_number"]


def make_monitor(task: str, *, threshold: float = 0.5, classes: Sequence[Hashable] | None = None,
                 labels: Sequence[Hashable] | None = None, confidence: float = 0.95) -> Monitor:
    """An empty monitor for ``task`` in {"binary", "multiclass", "labels", "regression"}, its
    snapshots' intervals at ``confidence`` (``Monitor.confidence``)."""
    from streammetrics.kernels.intervals import check_confidence

    monitor: Monitor
    if task == "binary":
        monitor = BinaryMonitor(threshold=threshold)
    elif task == "multiclass":
        if not classes:
            raise ValueError("task 'multiclass' needs classes (e.g. --classes cat,dog,bird)")
        monitor = MulticlassMonitor(classes)
    elif task == "labels":
        monitor = LabelMonitor(labels)
    elif task == "regression":
        monitor = RegressionMonitor()
    else:
        raise ValueError(f"task must be one of binary, multiclass, labels, regression; got {task!r}")
    if confidence != Monitor.confidence:  # (an instance attribute only when set: empty() copies it)
        monitor.confidence = check_confidence(confidence)
    return monitor
