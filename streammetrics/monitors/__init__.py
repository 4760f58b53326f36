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
from streammetrics.monitors.labels import DEFAULT_MAX_LABELS, LabelMonitor
from streammetrics.monitors.multiclass import MulticlassMonitor
from streammetrics.monitors.regression import RegressionMonitor

__all__ = ["Monitor", "BinaryMonitor", "MulticlassMonitor", "LabelMonitor", "RegressionMonitor",
           "make_monitor", "state_limits_for", "json_number", "DEFAULT_MAX_LABELS"]


def make_monitor(task: str, *, threshold: float = 0.5, classes: Sequence[Hashable] | None = None,
                 labels: Sequence[Hashable] | None = None, max_labels: int | None = None,
                 confidence: float = 0.95) -> Monitor:
    """An empty monitor for ``task`` in {"binary", "multiclass", "labels", "regression"};
    ``max_labels`` bounds the labels task's discovered labels (ignored with ``labels``); its
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
        monitor = LabelMonitor(labels, max_labels=None if labels is not None else max_labels)
    elif task == "regression":
        monitor = RegressionMonitor()
    else:
        raise ValueError(f"task must be one of binary, multiclass, labels, regression; got {task!r}")
    if confidence != Monitor.confidence:  # (an instance attribute only when set: empty() copies it)
        monitor.confidence = check_confidence(confidence)
    return monitor


def state_limits_for(task: str, *, classes: Sequence[Hashable] | None = None,
                     labels: Sequence[Hashable] | None = None, max_labels: int | None = None) -> dict[str, int]:
    """The state caps (:class:`~streammetrics.core.state.StateLimits` fields) a monitor of this
    configuration may need to read its own states back: ``K`` labels (``classes``, ``labels``,
    or ``2 * max_labels + 2`` discovered ones), ``K ** 2 + 2 K`` score histograms (multiclass:
    :class:`~streammetrics.metrics.multiclass_scores.MulticlassScores`) and as many list entries
    (confusion cells, histogram lengths). Used with :func:`~streammetrics.core.state.limits_covering`."""
    if task == "multiclass" and classes:
        k = len(classes)
        return {"max_labels": k, "max_histograms": k * k + 2 * k, "max_entries": k * k + 2 * k}
    if task == "labels":
        k = len(labels) if labels else 0 if max_labels is None else 2 * max_labels + 2
        return {"max_labels": k, "max_entries": k * k}
    return {}
