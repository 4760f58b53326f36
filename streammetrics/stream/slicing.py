"""Slices, roll-ups, worst slices and fairness (contract section 11; docs/slices.md).

``--slice-by F1,F2`` makes the event fields ``F1``, ``F2`` part of the stream key beside
``model`` and ``segment``: the window engine keys each event by ``(model, s)`` where ``s`` is the
JSON array ``[segment, v1, v2]`` (internal; also the key of the service's partial windows), and
each snapshot's ``"key"`` holds every dimension by name: ``{"model", "segment", "F1", "F2"}``. A
value is a string, or a number or boolean written as its JSON text; an absent or null field is
``""``; a value with ``|`` or longer than 1000 characters is refused (``bad_value``).

``--max-slice-values N`` bounds each ``--slice-by`` dimension **per window**: when a (model,
window) closes, each dimension's values are ranked by their events in that window (most first,
ties by value) and the first ``N`` keep their own slices; the slices of the others are merged
into ``"__other__"`` slices (``Accumulator.merge``), counted (:attr:`Slicer.folded`, and per
roll-up window under ``"folded"``). The decision is a function of the window's closed slices
alone, so replay, the service (after its merge stage) and Spark make the same one, whatever the
arrival order; published slices per (model, window) are at most the product of ``N + 1`` per
dimension. While a window is open its slices are the window engine's keys, bounded by
``--max-keys`` (a new key beyond it is refused, counted ``key_limit``).

``--rollup D1,D2`` (repeatable; ``model`` alone: the whole model): for each closed window, the
window's slices merged over the dimensions not named (``Accumulator.merge``: no event is applied
twice), published as a snapshot whose
``"key"`` holds ``model`` and the named dimensions and ``"rollup": [D1, D2]``. Merged states are
functions of the multiset of events, so a roll-up equals the snapshot of a run keyed by its
dimensions alone whenever no event is late in either run. A (model, window) is published, its
slices (sorted by key) then its roll-ups, once the watermark passed its end (at the end of
input, all), so nothing is held between two calls of :meth:`Slicer.process` in a run whose
slices close on one watermark. Roll-ups are of final windows (``revision`` 0); all-time
(``--cumulative``) snapshots are not rolled up.

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
import heapq
import json
import math
from dataclasses import dataclass
from itertools import islice
from typing import Any, Callable

from streammetrics.events.records import Event, Rejection
from streammetrics.kernels.fairness import fairness
from streammetrics.monitors.operating_points import OperatingPoints
from streammetrics.stream.snapshots import build_snapshot

__all__ = ["OTHER", "SliceSpec", "Slicer", "slice_label", "slice_settings", "sliced_snapshot_key"]

#: the value every value beyond a dimension's budget is mapped to
OTHER = "__other__"
#: default ``--max-slice-values``: distinct values per dimension with their own slice
DEFAULT_MAX_SLICE_VALUES = 100
#: default ``--worst-slices``: slices listed per roll-up window
DEFAULT_WORST_SLICES = 10
_MAX_VALUE = 1000
_MAX_CACHED = 1 << 16
#: a string as JSON text, as ``json.dumps`` writes it (ASCII, escaped)
_json_text = json.encoder.encode_basestring_ascii
#: events a roll-up's pending monitor of small states takes before it joins the total (below
#: BinaryScores' max_bins, so the pending one stays exact, and below a monitor's queue of
#: events, so that a monitor holding its events queued merges by concatenation)
_CHUNK_EVENTS = 1024
#: (model, window)s remembered as published incomplete (at most this many, oldest forgotten)
_MAX_PARTLY = 10_000
#: the confidence of the worst slices' gap intervals
GAP_CONFIDENCE = 0.95
#: metrics where a lower value is better (ranked by the largest gap)
LOWER_IS_BETTER = frozenset(["log_loss", "brier_score", "expected_cost", "estimated_expected_cost", "ece",
                             "mean_absolute_error", "mean_squared_error", "root_mean_squared_error"])
_SNAPSHOT_TAIL = ("window", "final", "count", "late", "revision", "labeled", "expired", "pending", "metrics",
                  "intervals", "insufficient", "state")


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
    """Monitors merged into one. Small slice windows are merged first into a pending monitor of
    small states (exact dictionary merges, or queues concatenated), which joins the total once
    it holds ``_CHUNK_EVENTS`` events (or when the total is read), so that a large total meets
    one state per chunk rather than one per slice. The sources are merged when the total is
    read, fewest events first (so that the many small ones are concatenated before a large one
    turns the pending monitor into histograms). The result is the same state (merged states are
    functions of the multiset of events)."""

    __slots__ = ("pending", "sources", "total")

    def __init__(self) -> None:
        self.total: Any = None
        self.pending: Any = None
        self.sources: list[Any] = []

    def add(self, source: Any) -> None:
        self.sources.append(source)

    def _merge(self, source: Any) -> None:
        pending = self.pending
        pending = self.pending = source.copy() if pending is None else pending.merge(source)
        if pending.count >= _CHUNK_EVENTS:
            self._fold()

    def _fold(self) -> None:
        pending, self.pending = self.pending, None
        if pending is not None:
            self.total = pending if self.total is None else self.total.merge(pending)

    @property
    def monitor(self) -> Any:
        if self.sources:
            sources, self.sources = self.sources, []
            for source in sorted(sources, key=_count):  # (stable: ties in the order added)
                self._merge(source)
        self._fold()
        return self.total


def _count(monitor: Any) -> int:
    return monitor.count


class _Rollup:
    """A roll-up window being merged: its monitor, slices, fairness groups and counts."""

    __slots__ = ("count", "final", "folded", "groups", "incomplete", "late", "merged", "slices")

    def __init__(self) -> None:
        self.merged = _Merged()
        self.final = True  # every slice final
        self.incomplete = False  # some slice published before the merge held all its partials
        self.slices: list[tuple[dict[str, Any], dict[str, Any], Any]] = []  # (key, snapshot, source)
        self.groups: dict[str, _Merged] = {}
        self.count = 0
        self.late = 0
        self.folded: dict[str, int] = {}


class Slicer:
    """The slicing layer: keys events by their slice (:meth:`wrap_parse`), sees each closed
    window's monitor (:meth:`hook`), and turns the closed
    slice windows into slice snapshots (the budget applied) plus roll-ups (:meth:`process`). The
    service's merge stage runs :meth:`process` on its merged slice windows (``consumers.partials``).

    Bounds: published slices per (model, window) at most the product of ``max_values + 1`` per
    dimension; slice windows and roll-up windows are held only from their close until
    :meth:`process` sees the watermark pass their end (the same call, when slices close on one
    watermark), each roll-up a merged monitor."""

    def __init__(self, spec: SliceSpec, include_state: bool = True,
                 extra_metrics: Callable[[tuple[str, str], Any, dict[str, Any]], None] | None = None) -> None:
        self.spec = spec
        self.include_state = include_state
        self._extra = extra_metrics
        #: events whose value of a dimension was beyond the window's budget (merged into ``__other__``)
        self.folded: dict[str, int] = dict.fromkeys(spec.fields, 0)
        self._sources: dict[int, Any] = {}  # id(snapshot metrics) -> its monitor
        # (segment, raw values) -> slice key, for string values (at most _MAX_CACHED entries:
        # past that, the key is built per event)
        self._keys: dict[tuple, str] = {}
        self._parsed: dict[str, tuple[str, ...]] = {}  # ... and each cached key's values
        # a valid slice value of the column decoder (str or None) -> (its text, its JSON text), at
        # most _MAX_CACHED of them
        self._value_texts: dict[str | None, tuple[str, str]] = {}
        # (end_ms, start_ms, model) -> [(slice key, snapshot, source)]: closed slice windows
        # waiting for the watermark to pass their end
        self._open: dict[tuple[int, int, str], list[tuple[str, dict[str, Any], Any]]] = {}
        self._fair = spec.fairness_by
        # each roll-up merges the windows of the smallest other roll-up naming a superset of its
        # dimensions when there is one (--rollup a,b then --rollup model: 2 merges per window of
        # a,b instead of one per slice), else the slices; finer roll-ups built first
        self._source: dict[tuple[str, ...], tuple[str, ...] | None] = {}
        for rollup in spec.rollups:
            wider = [r for r in spec.rollups if set(r) > set(rollup)]
            self._source[rollup] = min(wider, key=len) if wider else None
        self._order = sorted(spec.rollups, key=lambda r: -len(r))
        # (end, start, model) of windows whose roll-ups went out incomplete (a slice window the
        # merge stage evicted): their later slices' roll-ups are marked incomplete too
        self._partly: dict[tuple[int, int, str], None] = {}
        # the segment's position and the budgeted dimensions' positions in a slice key's values
        self._budgeted = list(range(1, len(spec.dims)))

    # ------------------------------------------------------------------ input
    def _value(self, raw: Any, name: str) -> str | Rejection:
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
        return text

    def wrap_parse(self, parse: Callable[[Any], Any]) -> Callable[[Any], Any]:
        """``parse`` whose events are keyed by their slice (their ``segment`` becomes the
        internal slice key); refusals name the slice field."""
        fields = self.spec.fields
        cache = self._keys
        parsed = self._parsed
        known_of = _known_of(fields)

        def sliced(raw: Any) -> Any:
            item = parse(raw)
            if item.__class__ is Event:
                known = known_of(item.segment, raw.get)  # (an Event comes from a dict)
                try:
                    key = cache.get(known)
                except TypeError:  # an unhashable value: refused below
                    key = None
                if key is not None:  # (only strings are cached)
                    item.segment = key
                    return item
                values = [item.segment]
                for name in fields:
                    v = self._value(raw, name)
                    if isinstance(v, Rejection):
                        return v
                    values.append(v)
                item.segment = json.dumps(values, separators=(",", ":"))
                if len(cache) < _MAX_CACHED and values == list(known) and all(v.__class__ is str for v in known):
                    cache[known] = item.segment
                    parsed[item.segment] = tuple(values)
            return item

        return sliced

    def column_keys(self, segments: list[str], rows: list[tuple[Any, ...]]) -> list[str | None]:
        """The slice keys :meth:`wrap_parse` gives events of ``segments[i]`` whose slice fields
        hold ``rows[i]`` (strings, None for null or absent: the column decoder's), None where it
        refuses them (the per-event path then says why)."""
        known = self._value_texts
        parts = [list(map(_json_text, segments))]
        texts: list[Any] = [segments]
        refused: list[int] = []
        for column in zip(*rows):  # (each slice field's values)
            got: list[Any] = list(map(known.get, column))
            if not all(got):  # (a text is a non-empty tuple)
                for i, v in enumerate(column):
                    if got[i] is None:
                        text = "" if v is None else v
                        if text.__class__ is not str or len(text) > _MAX_VALUE or "|" in text:
                            refused.append(i)
                            got[i] = ("", "")
                            continue
                        got[i] = (text, _json_text(text))
                        if len(known) < _MAX_CACHED:
                            known[v] = got[i]
            texts.append([g[0] for g in got])
            parts.append([g[1] for g in got])
        keys: list[str | None] = ["[" + ",".join(p) + "]" for p in zip(*parts)]  # json.dumps(texts, ...)
        for i in refused:
            keys[i] = None
        room = _MAX_CACHED - len(self._parsed)
        if room > 0:  # (each key's values, for key_values)
            made: Any = zip(keys, zip(*texts))
            self._parsed.update(islice(made if not refused else ((k, t) for k, t in made if k is not None), room))
        return keys

    def key_values(self, segment: str) -> tuple[str, ...]:
        """The dimension values of an internal slice key (ValueError when it is not one: a JSON
        array of ``len(dims)`` strings)."""
        known = self._parsed.get(segment)
        if known is not None:
            return known
        try:
            values = json.loads(segment)
        except ValueError:
            values = None
        if (values.__class__ is not list or len(values) != len(self.spec.dims)
                or not all(v.__class__ is str for v in values)):
            raise ValueError(f"segment {segment!r:.80} is not a slice key of {list(self.spec.dims)}")
        known = tuple(values)
        if len(self._parsed) < _MAX_CACHED:
            self._parsed[segment] = known
        return known

    def key_dict(self, key: tuple[str, str]) -> dict[str, str]:
        """A window engine key ``(model, slice key)`` as the snapshot's ``"key"``."""
        return {"model": key[0], **dict(zip(self.spec.dims, self.key_values(key[1])))}

    # ------------------------------------------------------------------ monitors
    def hook(self, key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
        """The window engine's ``extra_metrics``: the inner hook on the slice's own key
        ``(model, segment)``, and the window's monitor noted for :meth:`process`."""
        if self._extra is not None:
            self._extra((key[0], json.loads(key[1])[0]), monitor, metrics)
        if monitor is not None:
            self._sources[id(metrics)] = monitor

    def add_source(self, snapshot: dict[str, Any], monitor: Any) -> None:
        """Note ``monitor`` as the state of a slice snapshot given to :meth:`process` (a caller
        that builds the slice windows itself: Spark's slice stage, from their states)."""
        self._sources[id(snapshot["metrics"])] = monitor

    # ------------------------------------------------------------------ output
    def process(self, snaps: list[dict[str, Any]], watermark_s: float | None) -> list[dict[str, Any]]:
        """The (model, window)s whose end ``watermark_s`` passed (None: all, the end of input):
        their slice snapshots (keys by dimension, the budget applied) then their roll-ups; a
        revision or all-time snapshot passes with its key by dimension."""
        out = []
        sources = self._sources
        for snap in snaps:
            source = sources.pop(id(snap["metrics"]), None)
            key = snap["key"]
            if source is None or snap.get("cumulative") or snap.get("revision", 0) != 0:
                snap["key"] = self.key_dict((key["model"], key["segment"]))
                out.append(snap)
                continue
            window = snap["window"]
            group = (_ms(window["end"]), _ms(window["start"]), key["model"])
            items = self._open.get(group)
            if items is None:
                items = self._open[group] = []
            items.append((key["segment"], snap, source))
        limit = None if watermark_s is None else _ms(watermark_s) if math.isfinite(watermark_s) else -math.inf
        due = sorted(g for g in self._open if limit is None or g[0] <= limit)
        for group in due:
            out.extend(self._close(group, self._open.pop(group)))
        sources.clear()
        return out

    def _budget(self, items: list[tuple[tuple[str, ...], dict[str, Any], Any]]) -> list[set[str] | None]:
        """Per budgeted dimension, the values kept in this window (None: all fit)."""
        kept: list[set[str] | None] = []
        cap = self.spec.max_values
        for i in self._budgeted:
            counts: dict[str, int] = {}
            for values, snap, _ in items:
                counts[values[i]] = counts.get(values[i], 0) + snap["count"]
            if len(counts) <= cap:
                kept.append(None)
            else:
                kept.append({v for _, v in sorted((-c, v) for v, c in counts.items())[:cap]})
        return kept

    def _close(self, group: tuple[int, int, str], raw: list[tuple[str, dict[str, Any], Any]]
               ) -> list[dict[str, Any]]:
        end, start, model = group
        parsed = self._parsed
        items = [(parsed.get(segment) or self.key_values(segment), snap, source) for segment, snap, source in raw]
        kept = self._budget(items)
        slices: dict[tuple[str, ...], list[tuple[tuple[str, ...], dict[str, Any], Any]]] = {}
        dims = self.spec.dims
        folding = any(keep is not None for keep in kept)
        for item in items:
            values = item[0]
            if folding:
                folded = list(values)
                for i, keep in zip(self._budgeted, kept):
                    if keep is not None and values[i] not in keep:
                        folded[i] = OTHER
                        self.folded[dims[i]] += item[1]["count"]
                values = tuple(folded)
            got = slices.get(values)
            if got is None:
                slices[values] = [item]
            else:
                got.append(item)
        out: list[dict[str, Any]] = []
        leaves: list[tuple[tuple[str, ...], dict[str, Any], dict[str, Any], Any]] = []
        for ident in sorted(slices):  # (the order of the slices, and of ties among the worst ones)
            members = slices[ident]
            named = {"model": model, **dict(zip(dims, ident))}
            if len(members) == 1 and members[0][0] == ident:
                _, snap, source = members[0]
            else:  # values beyond the budget: one __other__ slice, their states merged
                merged = _Merged()
                for _, _, member in sorted(members, key=lambda m: m[0]):
                    merged.add(member)
                source = merged.monitor
                segment = json.dumps(list(ident), separators=(",", ":"))
                snap = build_snapshot((model, segment), source, start, end,
                                      final=all(m[1].get("final", True) for m in members),
                                      late=sum(m[1]["late"] for m in members), include_state=self.include_state,
                                      extra_metrics=self._inner(model, named["segment"]))
                if any(m[1].get("merge_incomplete") for m in members):
                    snap["merge_incomplete"] = True
            snap["key"] = named
            out.append(snap)
            leaves.append((ident, named, snap, source))
        if self.spec.rollups:
            out.extend(self._rollups(model, start, end, leaves, folding, group in self._partly))
        return out

    def _inner(self, model: str, segment: str) -> Callable[[tuple[str, str], Any, dict[str, Any]], None] | None:
        """The inner hook on ``(model, segment)`` (a merged window's snapshot)."""
        extra = self._extra
        if extra is None:
            return None

        def inner(key: tuple[str, str], monitor: Any, metrics: dict[str, Any]) -> None:
            extra((model, segment), monitor, metrics)

        return inner

    def _rollups(self, model: str, start: int, end: int,
                 leaves: list[tuple[tuple[str, ...], dict[str, Any], dict[str, Any], Any]],
                 folding: bool, partly: bool) -> list[dict[str, Any]]:
        spec = self.spec
        fair = self._fair
        open_: dict[tuple[tuple[str, ...], tuple[str, ...]], _Rollup] = {}
        worst = spec.worst_slices
        dims = spec.dims
        plans = []  # per roll-up: its dimensions' positions, whether it merges the slices, the folded ones
        for rollup in spec.rollups:
            where = tuple(dims.index(d) for d in rollup)
            others = [(d, dims.index(d)) for d in spec.fields if d not in rollup] if folding else []
            fair_at = dims.index(fair) if fair is not None and fair not in rollup else None
            plans.append((rollup, where, self._source[rollup] is None, others, fair_at))
        for values, named, snap, source in leaves:
            count = snap["count"]
            for rollup, where, merges, others, fair_at in plans:
                ident = tuple([values[i] for i in where])
                r = open_.get((rollup, ident))
                if r is None:
                    r = open_[(rollup, ident)] = _Rollup()
                if merges:
                    r.merged.add(source)
                r.count += count
                r.late += snap["late"]
                if not snap.get("final", True) or snap.get("merge_incomplete"):
                    r.final = r.final and snap.get("final", True)
                    r.incomplete = r.incomplete or bool(snap.get("merge_incomplete"))
                for d, i in others:
                    if values[i] == OTHER:
                        r.folded[d] = r.folded.get(d, 0) + count
                if worst:  # (the interval of the listed ones only: see _worst)
                    r.slices.append((named, snap, source))
                if fair_at is not None:
                    group = r.groups.get(values[fair_at])
                    if group is None:
                        group = r.groups[values[fair_at]] = _Merged()
                    group.add(source)
        built: list[tuple[tuple[int, tuple[str, ...]], dict[str, Any]]] = []
        for rollup in self._order:  # finer roll-ups first: they feed the coarser ones
            for (which, ident), r in sorted(open_.items()):
                if which != rollup:
                    continue
                built.append(((spec.rollups.index(rollup), ident), self._rollup_snapshot(model, start, end, rollup,
                                                                                        ident, r)))
                named = dict(zip(rollup, ident))
                for coarse, source in self._source.items():
                    if source == rollup:
                        target = open_[(coarse, tuple([named[d] for d in coarse]))]
                        target.merged.add(r.merged.monitor)
        built.sort(key=lambda item: item[0])
        snaps = [snap for _, snap in built]
        if partly or any(snap.get("merge_incomplete") for snap in snaps):  # not the whole window
            for snap in snaps:
                snap["merge_incomplete"], snap["final"] = True, False
            self._partly[(end, start, model)] = None
            if len(self._partly) > _MAX_PARTLY:
                del self._partly[next(iter(self._partly))]
        return snaps

    def _rollup_snapshot(self, model: str, start: int, end: int, rollup: tuple[str, ...], ident: tuple[str, ...],
                         r: _Rollup) -> dict[str, Any]:
        named = {"model": model, **dict(zip(rollup, ident))}
        segment = str(named.get("segment", ""))
        snap = build_snapshot((model, segment), r.merged.monitor, start, end, final=r.final, late=r.late,
                              include_state=self.include_state, extra_metrics=self._inner(model, segment))
        out: dict[str, Any] = {"schema": snap["schema"], "key": named, "rollup": list(rollup) or ["model"]}
        out.update((name, snap[name]) for name in _SNAPSHOT_TAIL if name in snap)
        if r.folded:
            out["folded"] = r.folded
        if self.spec.worst_slices:
            out["slices"] = self._worst(r, snap["metrics"].get(self.spec.worst_metric))
        if r.groups:
            out["fairness"] = {"dimension": self._fair, **self._fairness(r.groups)}
        if r.incomplete:  # (the service's merge stage evicted a slice window: --max-merge-windows)
            out["merge_incomplete"] = True
        return out

    def _worst(self, r: _Rollup, whole: Any) -> list[dict[str, Any]]:
        """The slices worst first (ties: in key order), each with its interval of the metric:
        the one its snapshot carries at ``GAP_CONFIDENCE``, else from its monitor."""
        metric = self.spec.worst_metric
        sign = -1.0 if metric in LOWER_IS_BETTER else 1.0  # worst first: the lowest (highest) gap
        number = isinstance(whole, (int, float))

        def rank(item: tuple[dict[str, Any], dict[str, Any], Any]) -> tuple[bool, float]:
            value = item[1]["metrics"].get(metric)
            if number and isinstance(value, (int, float)):
                return False, sign * (value - whole)
            return True, 0.0

        listed = heapq.nsmallest(self.spec.worst_slices, r.slices, key=rank)  # (stable: key order on ties)
        r.slices = []  # (the slices' monitors are released with the roll-up)
        rows = []
        for named, snap, source in listed:
            record = snap.get("intervals")
            if record is not None and record.get("confidence") == GAP_CONFIDENCE and metric in record:
                got = record[metric]
                interval = None if got is None else (got[0], got[1])
            else:
                interval = slice_interval(source, metric)
            rows.append(gap_row(named, metric, snap["metrics"].get(metric), whole, interval, snap["count"]))
        return rows

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


def _known_of(fields: tuple[str, ...]) -> Callable[[str, Callable[[str], Any]], tuple]:
    """``(segment, get(f1), get(f2), ...)`` for ``fields`` (written out for up to three: the
    per-event cost of the slice key)."""
    if len(fields) == 1:
        (f0,) = fields
        return lambda segment, get: (segment, get(f0))
    if len(fields) == 2:
        f0, f1 = fields
        return lambda segment, get: (segment, get(f0), get(f1))
    if len(fields) == 3:
        f0, f1, f2 = fields
        return lambda segment, get: (segment, get(f0), get(f1), get(f2))
    return lambda segment, get: (segment, *[get(name) for name in fields])


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


def slice_label(snapshot: dict[str, Any], key: dict[str, Any], segment: str) -> str:
    """The segment a sliced snapshot is reported under (the report, the service's per-key
    gauges): its slice dimensions ``segment / d1=v1 / d2=v2``, and a roll-up's ``rollup: d1=v1``
    (``rollup: model``), so that slices and roll-ups of one model are kept apart; the plain
    ``segment`` otherwise."""
    dims = [f"{name}={value}" for name, value in key.items() if name not in ("model", "segment")]
    if snapshot.get("rollup") is not None:
        return "rollup: " + (" / ".join(dims) or "model")
    if not dims:
        return segment
    return " / ".join(([segment] if segment else []) + dims)


def sliced_snapshot_key(snapshot: dict[str, Any]) -> bytes:
    """Kafka key of a slice or roll-up snapshot (the service's output): ``model|dims|window_start``
    where ``dims`` is the JSON object of the key's other dimensions (a roll-up's prefixed
    ``rollup:``), e.g. ``m|{"segment":"","country":"fr"}|60`` and ``m|rollup:{}|60``."""
    key = snapshot["key"]
    dims = json.dumps({d: v for d, v in key.items() if d != "model"}, separators=(",", ":"))
    prefix = "rollup:" if "rollup" in snapshot else ""
    tail = "cumulative" if snapshot.get("cumulative") else json.dumps(snapshot["window"]["start"])
    return f"{key['model']}|{prefix}{dims}|{tail}".encode()


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
