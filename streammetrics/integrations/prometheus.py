"""Prometheus exposition of monitors (``pip install prometheus-client``, also in the ``kafka`` extra).

:class:`MonitorCollector` is a custom collector: register it once, add monitors (any monitor, a
:class:`~streammetrics.monitors.shared.SharedMonitor` included) with their labels, and every
scrape reads their snapshots::

    from prometheus_client import REGISTRY, start_http_server
    from streammetrics.integrations.prometheus import MonitorCollector

    collector = MonitorCollector()
    collector.add(shared_monitor, model="fraud-v3", segment="eu")
    REGISTRY.register(collector)
    start_http_server(9108)

Families, one per kind of number (:func:`metric_kind`), each with a ``metric`` label naming the
snapshot metric, so a dashboard never mixes a count with a ratio or a loss:

=============================================  =====================================================
``{prefix}_ratio{metric=...}`` (unit ratio)    metrics from 0 to 1: accuracy, precision, recall,
                                               f1, roc_auc (and its bounds), average_precision,
                                               rates, drift_ks/drift_js, ece, estimated_* of those
``{prefix}_loss{metric=...}``                  losses and errors (lower is better): log_loss,
                                               brier_score, mse, rmse, mae, rmsle, mape, max_error,
                                               expected_cost
``{prefix}_events{metric=...}``                counts of events: count, labeled, pending, ...
``{prefix}_weight{metric=...}``                total_weight
``{prefix}_value{metric=...}``                 the rest (matthews_corrcoef, r2, cohen_kappa,
                                               drift_psi, drift_wasserstein, mean_score, thresholds)
=============================================  =====================================================

``prefix`` is ``streammetrics_monitor`` here (the Kafka service exports windows as
``streammetrics_window_*`` with the same kinds). Undefined metrics (``None``) are left out.
Bounded: at most ``max_monitors`` monitors (default 1,000) may be added; more is a ValueError.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Iterator, Mapping
from typing import Any

__all__ = ["KINDS", "MonitorCollector", "metric_kind"]

#: the kinds of :func:`metric_kind`: family suffix, its Prometheus unit ("" none) and help text
KINDS = {
    "ratio": ("ratio", "a metric from 0 to 1 (accuracy, precision, recall, f1, roc_auc, ...)"),
    "loss": ("", "a loss or error, lower is better (log_loss, brier_score, mse, mae, ...)"),
    "events": ("", "a count of events (count, labeled, pending, ...)"),
    "weight": ("", "a sum of event weights (total_weight)"),
    "value": ("", "any other metric (matthews_corrcoef, r2, cohen_kappa, drift_psi, thresholds, ...)"),
}
_RATIOS = frozenset([
    "accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity", "jaccard", "roc_auc",
    "roc_auc_low", "roc_auc_high", "roc_auc_weighted", "average_precision", "positive_rate",
    "predicted_positive_rate", "top_k_accuracy", "macro_f1", "weighted_f1", "micro_f1", "macro_precision",
    "macro_recall", "weighted_precision", "weighted_recall", "ece", "drift_ks", "drift_js", "tpr_at_fpr",
    "precision_at_recall", "recall_at_precision", "fpr", "tpr",
])
_LOSSES = frozenset(["log_loss", "brier_score", "mse", "rmse", "mae", "rmsle", "mape", "max_error",
                     "expected_cost", "hamming_loss"])
_COUNTS = frozenset(["count", "labeled", "pending", "expired", "late", "events"])
_CLASS = re.compile(r"^([^\[]+)\[.*\]$")  # METRIC[CLASS], as alert rules and the service name them
#: most monitors one collector exposes
DEFAULT_MAX_MONITORS = 1_000


def metric_kind(name: str) -> str:
    """The kind of snapshot metric ``name`` (a key of :data:`KINDS`): ``ratio``, ``loss``,
    ``events``, ``weight`` or ``value``. ``estimated_X`` is X's kind; ``METRIC[CLASS]`` METRIC's."""
    m = _CLASS.match(name)
    if m:
        name = m.group(1)
    if name.startswith("estimated_"):
        name = name[len("estimated_"):]
    if name in _RATIOS:
        return "ratio"
    if name in _LOSSES:
        return "loss"
    if name in _COUNTS:
        return "events"
    if name == "total_weight":
        return "weight"
    return "value"


def _numbers(snapshot: Mapping[str, Any]) -> Iterator[tuple[str, float]]:
    for name, value in snapshot.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            yield name, float(value)


class MonitorCollector:
    """A Prometheus collector of monitors' snapshots (see the module docstring). ``labels``
    names the label of each added monitor (default ``model``, ``segment``)."""

    def __init__(self, prefix: str = "streammetrics_monitor", labels: tuple[str, ...] = ("model", "segment"),
                 max_monitors: int = DEFAULT_MAX_MONITORS) -> None:
        try:
            from prometheus_client.core import GaugeMetricFamily
        except ImportError:
            raise ImportError("streammetrics.integrations.prometheus needs prometheus-client: "
                              "pip install prometheus-client") from None
        if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", prefix or ""):
            raise ValueError(f"prefix must be a Prometheus metric name, got {prefix!r}")
        labels = tuple(labels)
        for label in labels:
            if not re.fullmatch(r"[a-zA-Z_][a-zA-Z0-9_]*", label) or label == "metric":
                raise ValueError(f"labels: {label!r} is not a usable Prometheus label name")
        if type(max_monitors) is not int or max_monitors < 1:
            raise ValueError(f"max_monitors must be a positive integer, got {max_monitors!r}")
        self._family = GaugeMetricFamily
        self.prefix = prefix
        self.labels = labels
        self.max_monitors = max_monitors
        self._lock = threading.Lock()
        self._monitors: dict[tuple[str, ...], Any] = {}

    def add(self, monitor: Any, **labels: str) -> Any:
        """Expose ``monitor`` (anything with ``snapshot()``) with these label values; returns it.
        ValueError (nothing added) for labels other than :attr:`labels` or past ``max_monitors``."""
        if not callable(getattr(monitor, "snapshot", None)):
            raise ValueError(f"monitor must have a snapshot() method, got {type(monitor).__name__}")
        key = self._key(labels)
        with self._lock:
            if key not in self._monitors and len(self._monitors) >= self.max_monitors:
                raise ValueError(f"max_monitors ({self.max_monitors}) monitors are exposed already")
            self._monitors[key] = monitor
        return monitor

    def remove(self, **labels: str) -> None:
        """Stop exposing the monitor with these label values (none: nothing happens)."""
        key = self._key(labels)
        with self._lock:
            self._monitors.pop(key, None)

    def _key(self, labels: Mapping[str, Any]) -> tuple[str, ...]:
        unknown = set(labels) - set(self.labels)
        if unknown:
            raise ValueError(f"labels: {sorted(unknown)} not among {list(self.labels)}")
        for name, value in labels.items():
            if not isinstance(value, str):
                raise ValueError(f"label {name!r} must be a string, got {value!r}")
        return tuple(labels.get(name, "") for name in self.labels)

    def describe(self) -> list[Any]:
        """Nothing at registration (the families depend on the monitors added later)."""
        return []

    def collect(self) -> Iterator[Any]:
        """One gauge family per kind, a sample per (monitor, numeric snapshot metric)."""
        with self._lock:
            monitors = list(self._monitors.items())
        families = {}
        for kind, (unit, text) in KINDS.items():
            name = f"{self.prefix}_{kind}" if not unit else self.prefix
            families[kind] = self._family(name, f"streammetrics monitor snapshot: {text}",
                                          labels=[*self.labels, "metric"], unit=unit)
        for key, monitor in monitors:
            for name, value in _numbers(monitor.snapshot()):
                families[metric_kind(name)].add_metric([*key, name], value)
        yield from families.values()
