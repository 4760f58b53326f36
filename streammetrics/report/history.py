"""Snapshots grouped per stream key: metric series, monitors rebuilt from state, changes.

A :class:`KeyHistory` holds the windows of one ``(model, segment)`` in time order. Monitors
are rebuilt from each snapshot's ``state`` on demand; the *whole period* is the merge of the
monitors of non-overlapping windows (with hopping windows merging every window would count
each event several times).
"""
from __future__ import annotations

import math
import re
import statistics
import warnings
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterable, Sequence

from streammetrics import monitors as _monitors  # noqa: F401  (registers the monitor types with from_dict)
from streammetrics.core.accumulator import from_dict
from streammetrics.report.alerts import Alert, metric_value
from streammetrics.report.sources import WindowSnapshot

__all__ = ["KeyHistory", "Change", "group_by_key", "direction", "TASK_TITLES", "SUMMARY_METRICS", "LABEL_FREE_SUMMARY",
           "MAX_PROBLEMS", "PARTIAL_SHARE"]

#: problems noted per key verbatim (more are counted)
MAX_PROBLEMS = 20

_STATE_TASKS = {
    _monitors.BinaryMonitor.type_name: "binary",
    _monitors.MulticlassMonitor.type_name: "multiclass",
    _monitors.LabelMonitor.type_name: "labels",
    _monitors.RegressionMonitor.type_name: "regression",
}

TASK_TITLES = {
    "binary": "Binary classification",
    "multiclass": "Multiclass classification",
    "labels": "Hard labels",
    "regression": "Regression",
}

#: label-free columns of the summary table (drift and estimated performance, ``--reference``),
#: shown where some key of the task has them
LABEL_FREE_SUMMARY: dict[str, tuple[str, ...]] = {
    "binary": ("drift_ks", "drift_psi", "estimated_roc_auc", "estimated_accuracy", "estimated_f1"),
    "multiclass": ("drift_ks", "drift_psi", "estimated_accuracy", "estimated_macro_f1"),
}
#: a window cut by the end of the input (it overlaps the key's last window start and the key's last window
#: ends with the input) is *partial* when it holds fewer than this share of the median events of the key's
#: complete windows (at least ``PARTIAL_MIN_WINDOWS`` of them, the latest 20): charts draw it apart and the
#: summary shows the latest complete window instead of a drop that only says the input ended
PARTIAL_SHARE = 0.5
PARTIAL_MIN_WINDOWS = 3

#: the columns of the summary table, per task
SUMMARY_METRICS: dict[str, tuple[str, ...]] = {
    "binary": ("roc_auc", "f1", "precision", "recall", "accuracy", "log_loss", "brier_score", "count"),
    "multiclass": ("accuracy", "macro_f1", "roc_auc", "top_k_accuracy", "log_loss", "count"),
    "labels": ("accuracy", "macro_f1", "macro_precision", "macro_recall", "count"),
    "regression": ("rmse", "mae", "mse", "r2", "mape", "count"),
}

_HIGHER_IS_BETTER = {
    "accuracy", "balanced_accuracy", "precision", "recall", "f1", "specificity", "matthews_corrcoef",
    "roc_auc", "roc_auc_low", "roc_auc_high", "roc_auc_weighted", "average_precision", "top_k_accuracy",
    "macro_precision", "macro_recall", "macro_f1", "weighted_f1", "cohen_kappa", "r2",
}
_LOWER_IS_BETTER = {"log_loss", "brier_score", "mse", "rmse", "mae", "rmsle", "mape", "max_error", "late",
                    "drift_ks", "drift_psi", "drift_js", "drift_wasserstein", "ece"}


def direction(metric: str) -> int:
    """+1 if higher values are better, -1 if lower are, 0 if neither (counts, rates);
    ``estimated_X`` as X."""
    if metric.startswith("estimated_"):
        metric = metric[len("estimated_"):]
    if metric in _HIGHER_IS_BETTER:
        return 1
    if metric in _LOWER_IS_BETTER:
        return -1
    return 0


@dataclass(frozen=True)
class Change:
    """A metric's latest value and its change against the previous window."""

    metric: str
    value: float | None
    previous: float | None

    @property
    def delta(self) -> float | None:
        if self.value is None or self.previous is None:
            return None
        return self.value - self.previous

    def verdict(self, tolerance: float = 0.0) -> str:
        """"better", "worse", "same", "changed" (metric without a direction) or "n/a"."""
        delta = self.delta
        if delta is None:
            return "n/a"
        if abs(delta) <= tolerance:
            return "same"
        sign = direction(self.metric)
        if sign == 0:
            return "changed"
        return "better" if delta * sign > 0 else "worse"


def _infer_task(windows: Sequence[WindowSnapshot]) -> str:
    """The task from the monitor type in the state, else from the metric names."""
    for w in windows:
        if w.state_type in _STATE_TASKS:
            return _STATE_TASKS[w.state_type]
    names = set().union(*(w.metrics for w in windows)) if windows else set()
    if "roc_auc_low" in names or "brier_score" in names:
        return "binary"
    if "per_class" in names:
        return "multiclass" if "top_k_accuracy" in names or "log_loss" in names else "labels"
    if "mse" in names or "rmse" in names:
        return "regression"
    return "unknown"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-").lower() or "key"


def non_overlapping(windows: Sequence[WindowSnapshot]) -> list[WindowSnapshot]:
    """Windows in time order, skipping any that overlaps the previous kept one
    (all of them for tumbling windows, every size/slide-th one for hopping windows)."""
    kept: list[WindowSnapshot] = []
    for w in windows:
        if not kept or w.start >= kept[-1].end:
            kept.append(w)
    return kept


@dataclass
class KeyHistory:
    """The windows of one stream key, in time order, and what can be derived from them."""

    model: str
    segment: str
    windows: list[WindowSnapshot]
    cumulative: list[WindowSnapshot] = field(default_factory=list)
    alerts: list[Alert] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    more_problems: int = 0
    #: the stream time of the whole input, as far as the snapshots tell: the latest window end of any
    #: key (every window written had closed, so the stream had reached its end); 0 when unknown
    now: float = 0.0

    @property
    def key(self) -> tuple[str, str]:
        """The stream key ``(model, segment)``."""
        return (self.model, self.segment)

    @property
    def label(self) -> str:
        """``model / segment`` (just the model when the segment is empty)."""
        return f"{self.model} / {self.segment}" if self.segment else self.model

    @property
    def slug(self) -> str:
        """An HTML-id-safe name for the key."""
        return _slug(f"{self.model}-{self.segment}" if self.segment else self.model)

    @cached_property
    def task(self) -> str:
        return _infer_task(self.windows)

    @property
    def latest(self) -> WindowSnapshot:
        return self.windows[-1]

    @property
    def previous(self) -> WindowSnapshot | None:
        return self.windows[-2] if len(self.windows) > 1 else None

    @property
    def has_state(self) -> bool:
        return any(w.has_state for w in self.windows)

    @cached_property
    def delayed_labels(self) -> bool:
        """Some window of the key was written with labels still to come (a prediction pending or
        expired, or a revision above 0). Keys without are drawn as before delayed labels existed."""
        return any(w.awaits_labels for w in self.windows)

    def label_totals(self) -> tuple[int, int, int]:
        """(labelled, expired, pending) predictions over the non-overlapping windows' latest revisions."""
        kept = [w for w in non_overlapping(self.windows) if w.labeled is not None]
        return (sum(w.labeled or 0 for w in kept), sum(w.expired or 0 for w in kept),
                sum(w.pending or 0 for w in kept))

    @property
    def late(self) -> int:
        """Late events dropped for the key (the snapshots carry a running total)."""
        return max(w.late for w in self.windows)

    def series(self, metric: str) -> list[float]:
        """The metric per window, NaN where absent or undefined (matplotlib leaves gaps)."""
        return [_nan_if_none(metric_value(w, metric)) for w in self.windows]

    def interval_series(self, metric: str) -> tuple[list[float], list[float]]:
        """The metric's confidence interval per window (contract section 9), NaN where absent."""
        pairs = [w.intervals.get(metric) for w in self.windows]
        return ([math.nan if p is None else p[0] for p in pairs], [math.nan if p is None else p[1] for p in pairs])

    def significant(self, metric: str) -> list[bool]:
        """Per window: is its change of ``metric`` against the baseline significant (``changes``)?"""
        return [bool(w.changes.get(metric, {}).get("significant")) for w in self.windows]

    def class_series(self, label: str, metric: str) -> list[float]:
        """A per-class metric (``per_class[label][metric]``) per window, NaN where absent."""
        out = []
        for w in self.windows:
            row = w.metrics.get("per_class")
            cells = row.get(label) if isinstance(row, dict) else None
            value = cells.get(metric) if isinstance(cells, dict) else None
            out.append(float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan)
        return out

    @cached_property
    def classes(self) -> list[str]:
        """Class labels of the per-class tables, in order of first appearance."""
        seen: dict[str, None] = {}
        for w in self.windows:
            row = w.metrics.get("per_class")
            if isinstance(row, dict):
                seen.update(dict.fromkeys(row))
        return list(seen)

    @cached_property
    def partial(self) -> list[WindowSnapshot]:
        """The windows cut short by the end of the input (see :data:`PARTIAL_SHARE`), oldest first."""
        last = self.latest
        if self.now and last.end < self.now:  # the key stopped before the input did
            return []
        complete = [w.count for w in self.windows if w.end <= last.start][-20:]
        if len(complete) < PARTIAL_MIN_WINDOWS:
            return []
        typical = statistics.median(complete)
        return [w for w in self.windows if w.end > last.start and w.count < PARTIAL_SHARE * typical]

    @property
    def summary_window(self) -> WindowSnapshot:
        """The latest window that is not :attr:`partial` (what the summary shows)."""
        cut = {id(w) for w in self.partial}
        return next((w for w in reversed(self.windows) if id(w) not in cut), self.latest)

    def change(self, metric: str) -> Change:
        """Value of ``metric`` in the :attr:`summary_window` and in the window before it."""
        shown = self.summary_window
        i = next(i for i, w in enumerate(self.windows) if w is shown)
        prev = self.windows[i - 1] if i else None
        return Change(metric, metric_value(shown, metric), None if prev is None else metric_value(prev, metric))

    def total_events(self) -> int:
        """Events over the whole period (non-overlapping windows only)."""
        return sum(w.count for w in non_overlapping(self.windows))

    def monitor(self, window: WindowSnapshot) -> Any | None:
        """The monitor rebuilt from ``window.state``; None (and a problem noted) if absent or bad.

        Any exception from a hostile state is a note, never a crash of the report."""
        if not window.has_state:
            return None
        state = window.state
        if state is None:
            self.note(f"window starting {window.start:g}: unusable state (not a JSON object)")
            return None
        try:
            return from_dict(state)
        except Exception as exc:  # noqa: BLE001 - whatever a malformed state raises, the page goes on
            self.note(f"window starting {window.start:g}: unusable state ({_short(exc)})")
            return None

    def note(self, text: str) -> None:
        """Note a problem (the first :data:`MAX_PROBLEMS` verbatim, then only counted)."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(text)
        else:
            self.more_problems += 1

    @cached_property
    def latest_monitor(self) -> Any | None:
        return self.monitor(self.latest)

    @cached_property
    def period(self) -> tuple[Any, int] | None:
        """(merged monitor, windows merged) over the whole period, None without any state."""
        merged, used = None, 0
        for w in non_overlapping(self.windows):
            mon = self.monitor(w)
            if mon is None:
                continue
            try:
                merged = mon if merged is None else merged.merge(mon)
            except Exception as exc:  # noqa: BLE001 - a state that does not merge is a note
                self.note(f"whole period: window starting {w.start:g} not merged ({_short(exc)})")
                continue
            used += 1
        return None if merged is None else (merged, used)

    def alerted(self, rule_metric: str | None = None) -> list[WindowSnapshot]:
        """Windows where some rule (on ``rule_metric`` if given) fired, each once, in time order."""
        hits = {id(a.window): a.window for a in self.alerts if rule_metric is None or a.rule.metric == rule_metric}
        return [w for w in self.windows if id(w) in hits]


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _nan_if_none(value: float | None) -> float:
    return math.nan if value is None else value


def group_by_key(snapshots: Iterable[WindowSnapshot]) -> list[KeyHistory]:
    """One history per key, sorted by (model, segment); windows sorted by (start, end); ``now`` the
    latest window end of all keys."""
    windows: dict[tuple[str, str], list[WindowSnapshot]] = {}
    cumulative: dict[tuple[str, str], list[WindowSnapshot]] = {}
    now = 0.0
    for snap in snapshots:
        (cumulative if snap.cumulative else windows).setdefault(snap.key, []).append(snap)
        if not snap.cumulative and snap.end > now:
            now = snap.end
    histories = []
    for key in sorted(windows):
        ws = sorted(windows[key], key=lambda w: (w.start, w.end))
        cs = sorted(cumulative.get(key, []), key=lambda w: (w.end, w.start))
        histories.append(KeyHistory(model=key[0], segment=key[1], windows=ws, cumulative=cs, now=now))
    return histories


def quiet(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` with warnings silenced (undefined curves are detected by their NaNs)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)
