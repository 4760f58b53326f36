"""Slices, roll-ups, worst slices and fairness (contract section 11; docs/slices.md).

``--slice-by F1,F2`` makes the event fields ``F1``, ``F2`` part of the stream key beside
``model`` and ``segment``: the window engine keys each event by ``(model, s)`` where ``s`` is the
JSON array ``[segment, v1, v2]`` (internal; never written), and each snapshot's ``"key"`` holds
every dimension by name: ``{"model", "segment", "F1", "F2"}``. A value is a string, or a number or
boolean written as its JSON text; an absent or null field is ``""``; a value with ``|`` or longer
than 1000 characters is refused (``bad_value``). ``--max-slice-values N`` bounds each dimension:
the first ``N`` distinct values seen keep their own slices (a stream's frequent values come
early), every later one is ``"__other__"`` (counted: :attr:`Slicer.folded`, and per roll-up
window under ``"folded"``).

``--rollup D1,D2`` (repeatable; ``model`` alone: the whole model): for each closed window, the
window's slice monitors merged over the dimensions not named (``Accumulator.merge``: no event is
applied twice), published as a snapshot whose ``"key"`` holds ``model`` and the named dimensions
and ``"rollup": [D1, D2]``. Merged states are functions of the multiset of events, so a roll-up
equals the snapshot of a run keyed by its dimensions alone whenever no event is late in either
run (slices close on one shared watermark: a window of every slice closes when the stream passes
its end). A roll-up window is published once every slice of it has closed (the shared watermark
passed its end; at the end of input, all). Roll-ups are of final windows (``revision`` 0);
all-time (``--cumulative``) snapshots are not rolled up.

Each roll-up window lists under ``"slices"`` its slices ranked worst first by their gap to the
roll-up on ``--worst-metric`` (default ``roc_auc``; lower-is-better metrics such as ``log_loss``
ranked by the largest gap), at most ``--worst-slices`` (default 10) of them, slices without the
metric last. ``--fairness-by D`` adds ``"fairness"`` (:func:`streammetrics.kernels.fairness.fairness`:
fairlearn's demographic parity difference and ratio and equalized odds difference over D's values)
to each roll-up snapshot whose key does not hold D, from the merged confusion cells of each value
of D; D joins ``--slice-by`` and, without ``--rollup``, ``--rollup model`` is implied.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass
from typing import Any, Callable

from streammetrics.events.records import Event, Rejection
from streammetrics.kernels.fairness import fairness
from streammetrics.monitors.operating_points import OperatingPoints
from streammetrics.stream.snapshots import build_snapshot

__all__ = ["OTHER", "SliceSpec", "Slicer", "slice_settings"]

#: the value every value beyond a dimension's budget is mapped to
OTHER = "__other__"
#: default ``--max-slice-values``: distinct values per dimension with their own slice
DEFAULT_MAX_SLICE_VALUES = 100
#: default ``--worst-slices``: slices listed per roll-up window
DEFAULT_WORST_SLICES = 10
_MAX_VALUE = 1000
_MAX_CACHED = 1 << 16
#: the confidence of the worst slices' gap intervals
GAP_CONFIDENCE = 0.95
#: metrics where a lower value is better (ranked by the largest gap)
LOWER_IS_BETTER = frozenset(["log_loss", "brier_score", "expected_cost", "estimated_expected_cost", "ece",
                             "mean_absolute_error", "mean_squared_error", "root_mean_squared_error"])
_SNAPSHOT_TAIL = ("window", "final", "count", "late", "revision", "labeled", "expired", "pending", "metrics", "state")


@dataclass(frozen=True)
class SliceSpec:
    """The slicing settings: dimensions beyond ``segment``, their budget, the roll-ups
    (tuples of dimension names; ``()`` is the whole model), fairness and worst slices."""

    fields: tuple[str, ...] = ()
    max_values: int = DEFAULT_MAX_SLICE_VALUES
    rollups: tuple[tuple[str, ...], ...] = ()
    fairness_by: str | None = None
    worst_metric: str = "roc_auc"
    worst_slices: int = DEFAULT_WORST_SLICES

    def __post_init__(self) -> None:
        dims = ("segment", *self.fields)
        for f in self.fields:
            if f in ("model", "segment", "ts", "y_true", "score", "scores", "y_pred", "weight", "id"):
                raise ValueError(f"--slice-by {f}: an event field of the contract cannot be a slice dimension")
        if len(set(self.fields)) != len(self.fields):
            raise ValueError(f"--slice-by names a field twice: {','.join(self.fields)}")
        for rollup in self.rollups:
            for d in rollup:
                if d not in dims:
                    raise ValueError(f"--rollup {','.join(rollup)}: {d!r} is not a dimension "
                                     f"(model, {', '.join(dims)})")
        if self.fairness_by is not None and self.fairness_by not in dims:
            raise ValueError(f"--fairness-by {self.fairness_by}: not a dimension ({', '.join(dims)})")
        if isinstance(self.max_values, bool) or not isinstance(self.max_values, int) or self.max_values < 1:
            raise ValueError(f"--max-slice-values must be a positive integer, got {self.max_values!r}")
        if self.worst_slices < 0:
            raise ValueError(f"--worst-slices must be 0 or more, got {self.worst_slices!r}")

    @property
    def dims(self) -> tuple[str, ...]:
        return ("segment", *self.fields)


class _Merged:
    """Monitors merged into one. Small slice windows are exact (one level per distinct score):
    merged first into a pending exact monitor (dictionary merges), which joins the total when it
    leaves the exact form (or when the total is read), so that a binned total meets one state
    per ``max_bins`` distinct scores rather than one per slice. The result is the same state
    (merged states are functions of the multiset of events)."""

    __slots__ = ("pending", "total")

    def __init__(self) -> None:
        self.total: Any = None
        self.pending: Any = None

    def add(self, monitor: Any) -> None:
        pending = self.pending
        pending = self.pending = monitor.copy() if pending is None else pending.merge(monitor)
        if not _exact(pending):
            self._fold()

    def _fold(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            self.total = pending if self.total is None else self.total.merge(pending)

    @property
    def monitor(self) -> Any:
        self._fold()
        return self.total


def _exact(monitor: Any) -> bool:
    """Whether a monitor's score states keep every distinct score (a monitor without them: no)."""
    scores, predictions = getattr(monitor, "scores", None), getattr(monitor, "predictions", None)
    return bool(getattr(scores, "exact", False)) and getattr(predictions, "bins_per_octave", 0) is None


class _Rollup:
    """A roll-up window being merged: its monitor, slices, fairness groups and counts."""

    __slots__ = ("count", "folded", "groups", "late", "merged", "slices")

    def __init__(self) -> None:
        self.merged = _Merged()
        self.slices: list[tuple[dict[str, Any], Any, int, Any]] = []  # (key, value, count, monitor)
        self.groups: dict[str, _Merged] = {}
        self.count = 0
        self.late = 0
        self.folded: dict[str, int] = {}


class Slicer:
    """The slicing layer of a :class:`~streammetrics.stream.pipeline.Pipeline`: keys events by
    their slice (:meth:`wrap_parse`), sees each window's monitor (:meth:`hook`), and turns the
    window engine's snapshots into slice snapshots plus roll-ups (:meth:`process`).

    Bounds: each dimension holds at most ``max_values`` distinct values (so at most the product
    of the budgets, and the window engine's ``max_keys``, slice keys); roll-up windows held at
    once are at most (open windows) x (roll-ups) x (their value combinations), each a merged
    monitor, released when the watermark passes their end."""

    def __init__(self, spec: SliceSpec, include_state: bool = True,
                 extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], None] | None = None) -> None:
        self.spec = spec
        self.include_state = include_state
        self._extra = extra_metrics
        self._values: list[dict[str, None]] = [{} for _ in spec.fields]
        #: events whose value of a dimension was beyond its budget (mapped to ``__other__``)
        self.folded: dict[str, int] = dict.fromkeys(spec.fields, 0)
        self._monitors: dict[int, Any] = {}
        # (segment, raw values) -> slice key, for values that are strings of their own slices
        # (at most _MAX_CACHED entries: past that, the key is built per event)
        self._keys: dict[tuple, str] = {}
        self._open: dict[tuple[tuple[str, ...], str, int, int], _Rollup] = {}
        self._fair = spec.fairness_by
        # each roll-up merges the windows of the smallest other roll-up naming a superset of its
        # dimensions when there is one (--rollup a,b then --rollup model: 2 merges per window of
        # a,b instead of one per slice), else the slices' monitors; finer roll-ups built first
        self._source: dict[tuple[str, ...], tuple[str, ...] | None] = {}
        for rollup in spec.rollups:
            wider = [r for r in spec.rollups if set(r) > set(rollup)]
            self._source[rollup] = min(wider, key=len) if wider else None
        self._order = sorted(spec.rollups, key=lambda r: -len(r))

    # ------------------------------------------------------------------ input
    def _value(self, raw: Any, i: int, name: str) -> str | Rejection:
        v = raw.get(name) if raw.__class__ is dict else None
        if v is None:
            text = ""
        elif v.__class__ is str:
            text = v
        elif isinstance(v, (bool, int, float)) and not (isinstance(v, float) and not math.isfinite(v)):
            text = json.dumps(v)
        else:
            return Rejection(f"slice field '{name}' must be a string, number or boolean", name, code="bad_type")
        if len(text) > _MAX_VALUE or "|" in text:
            return Rejection(f"slice field '{name}' must be at most {_MAX_VALUE} characters without '|'", name,
                             code="bad_value")
        seen = self._values[i]
        if text not in seen:
            if len(seen) >= self.spec.max_values:
                self.folded[name] += 1
                return OTHER
            seen[text] = None
        return text

    def wrap_parse(self, parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``parse`` whose events are keyed by their slice (their ``segment`` becomes the
        internal slice key); refusals name the slice field."""
        fields = self.spec.fields
        cache = self._keys

        def sliced(raw: Any) -> Any:
            item = parse(raw)
            if item.__class__ is Event:
                get = raw.get  # (an Event comes from a dict)
                known = (item.segment, *[get(name) for name in fields])
                try:
                    key = cache.get(known)
                except TypeError:  # an unhashable value: refused below
                    key = None
                if key is not None:  # (only strings of their own slices are cached)
                    item.segment = key
                    return item
                values = [item.segment]
                for i, name in enumerate(fields):
                    v = self._value(raw, i, name)
                    if isinstance(v, Rejection):
                        return v
                    values.append(v)
                item.segment = json.dumps(values, separators=(",", ":"))
                if len(cache) < _MAX_CACHED and values == list(known) and all(
                        v.__class__ is str and v != OTHER for v in known):
                    cache[known] = item.segment
            return item

        return sliced

    def key_dict(self, key: tuple[str, str]) -> dict[str, str]:
        """A window engine key ``(model, slice key)`` as the snapshot's ``"key"``."""
        values = json.loads(key[1])
        return {"model": key[0], **dict(zip(self.spec.dims, values))}

    # ------------------------------------------------------------------ monitors
    def window_hook(self) -> Callable[[tuple[str, str], Any, dict[str, Any]], None] | None:
        """The window engine's ``extra_metrics``: :meth:`hook` with roll-ups (they need each
        window's monitor); else the inner hook on the slice's own key, or None (then small
        windows keep the engine's vectorised pass)."""
        if self.spec.rollups:
            return self.hook
        extra = self._extra
        if extra is None:
            return None

        def inner(key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
            extra((key[0], json.loads(key[1])[0]), monitor, metrics)

        return inner

    def hook(self, key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
        """The window engine's ``extra_metrics``: the inner hook on the slice's own key
        ``(model, segment)``, and the monitor noted for :meth:`process`."""
        if self._extra is not None:
            self._extra((key[0], json.loads(key[1])[0]), monitor, metrics)
        self._monitors[id(metrics)] = monitor

    # ------------------------------------------------------------------ output
    def process(self, snaps: list[dict[str, Any]], watermark_s: float | None) -> list[dict[str, Any]]:
        """The slice snapshots (keys by dimension) followed by the roll-up windows that ended
        at or before ``watermark_s`` (None: every roll-up window, the end of input)."""
        out = []
        for snap in snaps:
            monitor = self._monitors.pop(id(snap["metrics"]), None)
            key = snap["key"]
            internal = (key["model"], key["segment"])
            snap["key"] = named = self.key_dict(internal)
            out.append(snap)
            if monitor is None or snap.get("cumulative") or snap.get("revision", 0) != 0 or not self.spec.rollups:
                continue
            window = snap["window"]
            start, end = _ms(window["start"]), _ms(window["end"])
            for rollup in self.spec.rollups:
                values = json.dumps([named[d] for d in rollup], separators=(",", ":"))
                r = self._open.get((rollup, named["model"] + "|" + values, start, end))
                if r is None:
                    r = self._open[(rollup, named["model"] + "|" + values, start, end)] = _Rollup()
                if self._source[rollup] is None:
                    r.merged.add(monitor)
                r.count += snap["count"]
                r.late += snap["late"]
                for d in self.spec.fields:
                    if d not in rollup and named[d] == OTHER:
                        r.folded[d] = r.folded.get(d, 0) + snap["count"]
                if self.spec.worst_slices:  # (the interval of the listed ones only: see _worst)
                    r.slices.append((named, snap["metrics"].get(self.spec.worst_metric), snap["count"], monitor))
                fair = self._fair
                if fair is not None and fair not in rollup:
                    group = r.groups.get(named[fair])
                    if group is None:
                        group = r.groups[named[fair]] = _Merged()
                    group.add(monitor)
        out.extend(self._due(watermark_s))
        self._monitors.clear()
        return out

    def _due(self, watermark_s: float | None) -> list[dict[str, Any]]:
        limit = None if watermark_s is None else _ms(watermark_s) if math.isfinite(watermark_s) else None
        if watermark_s is not None and limit is None:
            return []  # -inf: no event yet
        built: list[tuple[tuple, dict[str, Any]]] = []
        for rollup in self._order:  # finer roll-ups first: they feed the coarser ones
            due = [k for k in self._open if k[0] == rollup and (limit is None or k[3] <= limit)]
            for k in due:
                r = self._open.pop(k)
                built.append(((k[3], k[2], self.spec.rollups.index(rollup), k[1]), self._rollup_snapshot(k, r)))
                model, values = k[1].split("|", 1)
                named = dict(zip(rollup, json.loads(values)))
                for coarse, source in self._source.items():
                    if source == rollup:
                        ident = model + "|" + json.dumps([named[d] for d in coarse], separators=(",", ":"))
                        target = self._open[(coarse, ident, k[2], k[3])]  # (its slices made it)
                        target.merged.add(r.merged.monitor)
        built.sort(key=lambda item: item[0])
        return [snap for _, snap in built]

    def _rollup_snapshot(self, k: tuple[tuple[str, ...], str, int, int], r: _Rollup) -> dict[str, Any]:
        rollup, ident, start, end = k
        model, values = ident.split("|", 1)
        named = {"model": model, **dict(zip(rollup, json.loads(values)))}
        segment = named.get("segment", "")
        inner = None
        if self._extra is not None:
            extra = self._extra

            def inner(key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
                extra((model, str(segment)), monitor, metrics)

        snap = build_snapshot((model, str(segment)), r.merged.monitor, start, end, final=True, late=r.late,
                              include_state=self.include_state, extra_metrics=inner)
        out: dict[str, Any] = {"schema": snap["schema"], "key": named, "rollup": list(rollup) or ["model"]}
        out.update((name, snap[name]) for name in _SNAPSHOT_TAIL if name in snap)
        if r.folded:
            out["folded"] = r.folded
        if self.spec.worst_slices:
            out["slices"] = self._worst(r, snap["metrics"].get(self.spec.worst_metric))
        if r.groups:
            out["fairness"] = {"dimension": self._fair, **self._fairness(r.groups)}
        return out

    def _worst(self, r: _Rollup, whole: Any) -> list[dict[str, Any]]:
        metric = self.spec.worst_metric
        sign = -1.0 if metric in LOWER_IS_BETTER else 1.0  # worst first: the lowest (highest) gap
        def rank(item: tuple[dict[str, Any], Any, int, Any]) -> tuple:
            value = item[1]
            gap = value - whole if isinstance(value, (int, float)) and isinstance(whole, (int, float)) else None
            return gap is None, 0.0 if gap is None else sign * gap, json.dumps(item[0], sort_keys=True)

        listed = sorted(r.slices, key=rank)[: self.spec.worst_slices]
        r.slices = []  # (the slices' monitors are released with the roll-up)
        return [gap_row(named, metric, value, whole, slice_interval(monitor, metric), count)
                for named, value, count, monitor in listed]

    @staticmethod
    def _fairness(groups: dict[str, Any]) -> dict[str, Any]:
        cells: dict[str, tuple[float, float, float, float, int]] = {}
        for value, merged in sorted(groups.items()):
            monitor = merged.monitor
            counts = monitor.confusion.counts()
            get = counts.get
            cells[value] = (get((0, 0), 0.0), get((0, 1), 0.0), get((1, 0), 0.0), get((1, 1), 0.0),
                            monitor.confusion.count)
        return fairness(cells)


def slice_interval(monitor: Any, metric: str, confidence: float = GAP_CONFIDENCE) -> tuple[float, float] | None:
    """The slice's ``confidence`` interval of ``metric`` (``Monitor.interval``: DeLong for ROC
    AUC, Wilson / delta-method ones for the rates; None with too few events, weights other than
    1, or a metric without one)."""
    if metric not in getattr(monitor, "interval_metrics", ()):
        return None
    try:
        return monitor.interval(metric, confidence)
    except (ValueError, TypeError, ArithmeticError):
        return None


def gap_row(named: dict[str, Any], metric: str, value: Any, whole: Any, interval: tuple[float, float] | None,
            count: int) -> dict[str, Any]:
    """A slice's row in its roll-up's ``"slices"``: ``gap = value - whole`` and, when the slice
    has an interval ``[low, high]`` of the metric, ``gap_low = low - whole``, ``gap_high = high -
    whole`` and ``significant``: the roll-up's value lies outside the slice's interval (the
    roll-up taken as known: conservative, since it holds the slice; false-alarm rate measured by
    ``benchmarks/sim_slice_gaps.py``)."""
    numbers = isinstance(value, (int, float)) and isinstance(whole, (int, float))
    row: dict[str, Any] = {"key": named, metric: value, "gap": value - whole if numbers else None}
    if interval is not None and isinstance(whole, (int, float)):
        low, high = interval
        row["gap_low"], row["gap_high"] = low - whole, high - whole
        row["significant"] = bool(whole < low or whole > high)
    else:
        row["gap_low"] = row["gap_high"] = row["significant"] = None
    row["count"] = count
    return row


def _ms(seconds: float) -> int:
    return int(round(seconds * 1000))


def _names(text: str, flag: str) -> tuple[str, ...]:
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise ValueError(f"{flag} takes comma-separated field names, got {text!r}")
    return names


def slice_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``PipelineConfig`` keyword arguments of the section-11 flags in ``args`` (absent
    flags: nothing, so the default configuration, and output, are unchanged). ValueError
    (one line, naming the flag) when they do not fit together."""
    out: dict[str, Any] = {}
    task = getattr(args, "task", "binary")
    points = OperatingPoints(
        target_recall=getattr(args, "target_recall", None), target_precision=getattr(args, "target_precision", None),
        target_fpr=getattr(args, "target_fpr", None), cost_fp=getattr(args, "cost_fp", None),
        cost_fn=getattr(args, "cost_fn", None))
    if points.enabled:
        if task != "binary":
            raise ValueError(f"--target-recall, --target-precision, --target-fpr, --cost-fp and --cost-fn apply to "
                             f"--task binary, not --task {task}")
        out["operating_points"] = points
    slice_by = getattr(args, "slice_by", None)
    rollups = getattr(args, "rollup", None) or []
    fair = getattr(args, "fairness_by", None)
    if slice_by is None and not rollups and fair is None:
        return out
    fields = list(_names(slice_by, "--slice-by")) if slice_by else []
    if fair is not None and fair != "segment" and fair not in fields:
        fields.append(fair)
    parsed = []
    for text in rollups:
        names = _names(text, "--rollup")
        parsed.append(() if names == ("model",) else tuple(n for n in names if n != "model"))
    if fair is not None and task != "binary":
        raise ValueError(f"--fairness-by applies to --task binary, not --task {task}")
    if fair is not None and not parsed:
        parsed.append(())
    out["slicing"] = SliceSpec(
        fields=tuple(fields), max_values=getattr(args, "max_slice_values", None) or DEFAULT_MAX_SLICE_VALUES,
        rollups=tuple(parsed), fairness_by=fair, worst_metric=getattr(args, "worst_metric", None) or "roc_auc",
        worst_slices=DEFAULT_WORST_SLICES if getattr(args, "worst_slices", None) is None else args.worst_slices)
    return out
