"""Changes of a window's metrics against a baseline, with the false discovery rate controlled
over the windows published together (contract section 9, issue 26).

With ``--reference`` (binary task) the baseline of each key is its reference: the reference's
value of each metric, and its interval, from the reference's state (``Reference.scores``: the
reference's score histograms, and its confusion matrix at ``threshold``), so the comparison
counts the reference's sampling error too. With ``--compare previous`` the baseline is the key's
previous window (its snapshot's metrics and intervals; a revision of a window is compared with
the window before it). Every metric with an interval on both sides gets::

    "changes": {"<metric>": {"baseline": b, "difference": d, "interval": [low, high],
                             "p_value": p, "significant": true|false}, ...}

by :func:`~streammetrics.kernels.intervals.differences` (MOVER: the difference's interval from
the two intervals; ``p`` the two-sided Wald p-value read from the side of the interval facing
0). ``significant`` is Benjamini-Hochberg at ``fdr`` (``--fdr``, default 0.05) over every
(key, metric) test of the windows published together: the snapshots of one window span
(:func:`family`: every key's window closed at one pane boundary) among those one ``poll``
publishes), so thousands of healthy keys do not raise hundreds of alarms per window, and a poll
that closes several window spans (replay polls every few thousand lines) tests each on its own,
as the merge stage of ``--partitioning any`` does with the windows one watermark advance publishes.

Bounds: ``--compare previous`` remembers at most ``max_keys`` keys' last two windows (the
pipeline's ``--max-keys``, default 100,000); a key beyond it is not compared and counted in
:attr:`Changes.forgotten`. References are already bounded by ``--max-references``. A multiclass
reference's baseline is its arg-max confusion matrix's ``accuracy`` and ``macro_f1``
(:func:`multiclass_reference_baseline`).

Checkpoints: what ``--compare previous`` remembers is part of the pipeline's checkpoint
(:meth:`Changes.to_dict`, :meth:`Changes.delta_dict` with the keys changed since the last one,
:meth:`Changes.load`), so a restored service compares its next windows as the uninterrupted one.
"""
from __future__ import annotations

import json
import math
import warnings
from typing import Any, Mapping

import numpy as np

from streammetrics.kernels.counts import binary_confusion_metrics
from streammetrics.kernels.intervals import (
    BINARY_INTERVALS,
    benjamini_hochberg,
    confusion_intervals,
    differences,
    z_value,
)
from streammetrics.monitors.reference import Reference

__all__ = ["COMPARE_MODES", "Changes"]

#: ``--compare``: against the key's reference, or the key's previous window
COMPARE_MODES = ("reference", "previous")

Baseline = dict[str, tuple[float, list[float] | None]]


def reference_baseline(reference: Any, confidence: float) -> Baseline:
    """Per metric of :data:`~streammetrics.kernels.intervals.BINARY_INTERVALS` (but the predicted
    positive rate, which the reference does not keep apart): ``(value, interval or None)`` of a
    binary ``Reference``'s state (its ``scores`` and their confusion at its ``threshold``; weighted
    references by their effective sizes, each class's ``sum w^2`` spread over its cells by weight)."""
    scores = reference.scores
    cm = scores.confusion_at(reference.threshold)
    get = cm.counts().get
    tn, fp, fn, tp = get((0, 0), 0.0), get((0, 1), 0.0), get((1, 0), 0.0), get((1, 1), 0.0)
    values = binary_confusion_metrics(tn=tn, fp=fp, fn=fn, tp=tp)
    columns: Mapping[str, Any] = {}
    if scores.unit_weights:
        columns = confusion_intervals(tn, fp, fn, tp, z_value(confidence))
    elif (squares := scores.class_squares()) is not None and tn + fp > 0 and tp + fn > 0:
        # weighted: the reference keeps sum w^2 per class; within a class it is spread over the
        # cells in proportion to their weight (Kish pseudo-counts, kernels.intervals)
        neg, pos = squares[0] / (tn + fp), squares[1] / (tp + fn)
        columns = confusion_intervals(tn, fp, fn, tp, z_value(confidence), [tn * neg, fp * neg, fn * pos, tp * pos])
    out: Baseline = {}
    score_pairs = scores.intervals(confidence)  # (the three from one pass)
    for name in BINARY_INTERVALS:
        if name in score_pairs:
            with np.errstate(all="ignore"):
                try:
                    value = getattr(scores, name)()
                except ValueError:  # (log loss / Brier of margins)
                    continue
            pair = score_pairs[name]
        elif name in columns:
            value = values[name]
            lo, hi = columns[name]
            pair = None if math.isnan(lo[0]) else (float(lo[0]), float(hi[0]))
        else:
            continue
        if value is not None and math.isfinite(value):
            out[name] = (float(value), None if pair is None else [pair[0], pair[1]])
    return out


def multiclass_reference_baseline(reference: Any, confidence: float) -> Baseline:
    """``accuracy`` and ``macro_f1`` ``(value, interval or None)`` of a ``MulticlassReference``'s
    arg-max confusion matrix (its labels' classes), as a multiclass window's snapshot gives them."""
    cm = reference.scores.confusion()
    out: Baseline = {}
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        values = {"accuracy": cm.accuracy(), "macro_f1": cm.f1(average="macro", zero_division=0)}
        for name, value in values.items():
            pair = cm.interval(name, confidence)
            if value is not None and math.isfinite(value):
                out[name] = (float(value), None if pair is None else [pair[0], pair[1]])
    return out


def _snapshot_baseline(snap: Mapping[str, Any]) -> Baseline:
    """``(value, interval)`` of every metric a snapshot gives a value for (but the CBPE estimates:
    their intervals share the reference's calibration error, so two windows' are not independent)."""
    metrics, intervals = snap.get("metrics") or {}, snap.get("intervals") or {}
    return {k: (v, intervals.get(k)) for k, v in metrics.items()
            if k in intervals and isinstance(v, (int, float)) and not isinstance(v, bool)
            and not k.startswith("estimated_")}


class Changes:
    """Adds ``changes`` to the snapshots of one poll (see the module docstring)."""

    def __init__(self, mode: str, fdr: float = 0.05, references: Mapping[tuple[str, str], Any] | None = None,
                 max_keys: int | None = 100_000) -> None:
        if mode not in COMPARE_MODES:
            raise ValueError(f"--compare must be one of {', '.join(COMPARE_MODES)}, got {mode!r}")
        if isinstance(fdr, bool) or not isinstance(fdr, (int, float)) or not 0.0 < fdr < 1.0:
            raise ValueError(f"--fdr must be a number strictly between 0 and 1, got {fdr!r}")
        if mode == "reference" and references is None:
            raise ValueError("--compare reference needs --reference FILE")
        self.mode, self.fdr, self.max_keys = mode, float(fdr), max_keys
        self._references = references or {}
        self._reference_baselines: dict[tuple[tuple[str, str], float], Baseline] = {}
        #: per key: (start of its newest window, that window's baseline, the one before's)
        self._previous: dict[tuple[str, str], tuple[float, Baseline, Baseline | None]] = {}
        #: keys --compare previous could not remember (beyond ``max_keys``)
        self.forgotten = 0
        #: keys whose memory changed since :meth:`track_changes` (None: not tracking)
        self._changed: set[tuple[str, str]] | None = None

    def _baseline(self, key: tuple[str, str], snap: dict[str, Any], confidence: float) -> Baseline | None:
        if self.mode == "reference":  # (a slice or roll-up: the reference of its model and segment)
            key = (snap["key"]["model"], snap["key"].get("segment", ""))
            ref = self._references.get(key)
            if ref is None:
                return None
            cached = self._reference_baselines.get((key, confidence))
            if cached is None:
                make = reference_baseline if isinstance(ref, Reference) else multiclass_reference_baseline
                cached = self._reference_baselines[(key, confidence)] = make(ref, confidence)
            return cached
        if snap.get("cumulative"):
            return None
        start = snap["window"]["start"]
        mine = _snapshot_baseline(snap)
        held = self._previous.get(key)
        if self._changed is not None:
            self._changed.add(key)
        if held is None:
            if self.max_keys is None or len(self._previous) < self.max_keys:
                self._previous[key] = (start, mine, None)
            else:
                self.forgotten += 1
            return None
        last_start, last, before = held
        if start == last_start:  # a revision: compared with the window before
            self._previous[key] = (start, mine, before)
            return before
        if start > last_start:
            self._previous[key] = (start, mine, last)
            return last
        return None  # (an older window published late: not compared)

    # ------------------------------------------------------------------ checkpoint
    def to_dict(self) -> dict[str, Any]:
        """JSON-safe memory of ``--compare previous``: per key ``[model, segment, start, newest,
        before]`` (a baseline as ``{metric: [value, [low, high] | null]}``, ``before`` null when
        none) and the ``forgotten`` count."""
        return {"type": "Changes", "version": 1, "forgotten": self.forgotten,
                "keys": [_key_row(key, held) for key, held in self._previous.items()]}

    def track_changes(self) -> None:
        """Start recording the keys :meth:`delta_dict` writes (the state equals the checkpoint)."""
        self._changed = set()

    def delta_dict(self) -> dict[str, Any]:
        """The keys changed since the last :meth:`delta_dict` / :meth:`track_changes` (every key
        before tracking started), as :meth:`to_dict` rows; :meth:`apply_delta` merges them."""
        keys = self._previous if self._changed is None else self._changed
        rows = [_key_row(key, self._previous[key]) for key in keys if key in self._previous]
        self._changed = set()
        return {"type": "ChangesDelta", "version": 1, "forgotten": self.forgotten, "keys": rows}

    @staticmethod
    def apply_delta(full: Any, *deltas: Any) -> dict[str, Any]:
        """:meth:`to_dict` data ``full`` with ``deltas`` (:meth:`delta_dict`) applied (rows
        replaced per key); ValueError (one line) for a malformed one. :meth:`load` validates."""
        if not isinstance(full, Mapping) or full.get("type") != "Changes" or not isinstance(full.get("keys"), list):
            raise ValueError("malformed Pipeline checkpoint: changes")
        rows = {(r[0], r[1]) if isinstance(r, list) and len(r) == 5 else None: r for r in full["keys"]}
        forgotten = full.get("forgotten")
        for delta in deltas:
            if not isinstance(delta, Mapping) or delta.get("type") != "ChangesDelta" or not isinstance(
                    delta.get("keys"), list):
                raise ValueError("malformed Pipeline checkpoint delta: changes")
            for r in delta["keys"]:
                rows[(r[0], r[1]) if isinstance(r, list) and len(r) == 5 else None] = r
            forgotten = delta.get("forgotten")
        return {"type": "Changes", "version": 1, "forgotten": forgotten, "keys": list(rows.values())}

    def load(self, data: Any) -> "Changes":
        """Replace the memory with :meth:`to_dict` data, validated in full first (ValueError, one
        line naming the field; nothing changed). More keys than ``max_keys``: refused."""
        if not isinstance(data, Mapping) or data.get("type") != "Changes" or data.get("version") != 1:
            raise ValueError("malformed Pipeline checkpoint: changes (type/version)")
        forgotten, rows = data.get("forgotten"), data.get("keys")
        if type(forgotten) is not int or forgotten < 0:
            raise ValueError(f"malformed Pipeline checkpoint: changes.forgotten must be a non-negative int, "
                             f"got {forgotten!r:.40}")
        if not isinstance(rows, list):
            raise ValueError("malformed Pipeline checkpoint: changes.keys must be a list")
        if self.max_keys is not None and len(rows) > self.max_keys:
            raise ValueError(f"malformed Pipeline checkpoint: changes.keys holds {len(rows)} keys, "
                             f"more than --max-keys {self.max_keys}")
        previous: dict[tuple[str, str], tuple[float, Baseline, Baseline | None]] = {}
        for i, row in enumerate(rows):
            where = f"changes.keys[{i}]"
            if not isinstance(row, list) or len(row) != 5 or not all(isinstance(x, str) for x in row[:2]):
                raise ValueError(f"malformed Pipeline checkpoint: {where} must be [model, segment, start, newest, "
                                 f"before]")
            start = row[2]
            if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start):
                raise ValueError(f"malformed Pipeline checkpoint: {where}[2] (start) must be a finite number")
            previous[(row[0], row[1])] = (start, _baseline_of(row[3], f"{where}[3]"),
                                          None if row[4] is None else _baseline_of(row[4], f"{where}[4]"))
        self._previous, self.forgotten = previous, forgotten
        return self

    def annotate(self, snaps: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """``snaps`` with ``changes`` after their ``insufficient`` (those with intervals and a
        baseline), ``significant`` by Benjamini-Hochberg over the tests of the snapshots of one
        window span (:func:`family`) among ``snaps``: the windows one pane boundary closes, whichever
        way the publisher batches them (a replay poll, the merge stage's watermark advance)."""
        families: dict[Any, tuple[list[dict[str, Any]], list[float]]] = {}
        compared: list[tuple[int, dict[str, Any], list[str], list[float]]] = []  # (index, snap, names, baselines)
        columns: list[list[float]] = [[], [], [], [], [], [], []]  # value, low, high, base, its low, high, z
        for i, snap in enumerate(snaps):
            intervals = snap.get("intervals")
            if intervals is None:
                continue
            confidence = intervals["confidence"]
            baseline = self._baseline(series_key(snap), snap, confidence)
            if not baseline:
                continue
            names = [k for k in intervals if k != "confidence" and intervals[k] is not None and k in baseline
                     and isinstance(snap["metrics"].get(k), (int, float))]
            if not names:
                snaps[i] = _with_changes(snap, {})
                continue
            base = [baseline[k][0] for k in names]
            pairs = [baseline[k][1] or [math.nan, math.nan] for k in names]
            columns[0] += [snap["metrics"][k] for k in names]
            columns[1] += [intervals[k][0] for k in names]
            columns[2] += [intervals[k][1] for k in names]
            columns[3] += base
            columns[4] += [p[0] for p in pairs]
            columns[5] += [p[1] for p in pairs]
            columns[6] += [z_value(confidence)] * len(names)
            compared.append((i, snap, names, base))
        if compared:  # (elementwise: every snapshot's metrics compared in one call)
            value, low, high, base_, base_low, base_high, z = columns
            d = differences(value, low, high, base_, base_low, base_high, np.array(z))
            difference, d_low, d_high, p_value = (d[k].tolist() for k in ("difference", "low", "high", "p_value"))
            at = 0
            for i, snap, names, base in compared:
                changes: dict[str, Any] = {}
                entries, p_values = families.setdefault(family(snap), ([], []))
                for j, k in enumerate(names):
                    entry: dict[str, Any] = {"baseline": base[j], "difference": difference[at],
                                             "interval": [d_low[at], d_high[at]], "p_value": p_value[at],
                                             "significant": False}
                    changes[k] = entry
                    entries.append(entry)
                    p_values.append(p_value[at])
                    at += 1
                snaps[i] = _with_changes(snap, changes)
        for entries, p_values in families.values():
            for entry, significant in zip(entries, benjamini_hochberg(p_values, self.fdr).tolist()):
                entry["significant"] = significant
        return snaps


def series_key(snap: Mapping[str, Any]) -> tuple[str, str]:
    """The series a snapshot belongs to, as ``(model, segment)``: its key's, or for a slice or
    roll-up (contract section 11: a key of several dimensions) ``(model, text)`` with ``text``
    the JSON of ``[roll-up dimensions, sorted other key fields]``, so that no two slices or
    roll-ups of one model share a previous window."""
    key = snap["key"]
    if "rollup" not in snap and len(key) == 2 and "segment" in key:
        return key["model"], key["segment"]
    rest = sorted((name, value) for name, value in key.items() if name != "model")
    return key["model"], json.dumps([snap.get("rollup") or [], rest], separators=(",", ":"))


def family(snap: Mapping[str, Any]) -> tuple[Any, Any] | None:
    """The false-discovery family of a snapshot: its window's ``(start, end)`` (every key's
    window of that span published together is one family; a cumulative snapshot's: None)."""
    window = snap.get("window")
    if not isinstance(window, Mapping):
        return None
    return (window.get("start"), window.get("end"))


def _key_row(key: tuple[str, str], held: tuple[float, Baseline, Baseline | None]) -> list[Any]:
    start, newest, before = held
    return [key[0], key[1], start, {k: [v, p] for k, (v, p) in newest.items()},
            None if before is None else {k: [v, p] for k, (v, p) in before.items()}]


def _number(x: Any) -> bool:
    return not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x)


def _baseline_of(raw: Any, where: str) -> Baseline:
    """A checkpointed baseline ``{metric: [value, [low, high] | null]}``, validated."""
    if not isinstance(raw, Mapping):
        raise ValueError(f"malformed Pipeline checkpoint: {where} must be a mapping of metrics")
    out: Baseline = {}
    for name, item in raw.items():
        if (not isinstance(item, list) or len(item) != 2 or not _number(item[0])
                or not (item[1] is None or (isinstance(item[1], list) and len(item[1]) == 2
                                            and all(_number(x) for x in item[1])))):
            raise ValueError(f"malformed Pipeline checkpoint: {where}[{name!r:.40}] must be "
                             "[value, [low, high] | null]")
        out[str(name)] = (float(item[0]), None if item[1] is None else [float(item[1][0]), float(item[1][1])])
    return out


def _with_changes(snap: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``snap`` with ``changes`` after ``insufficient`` (before ``state``, as the contract lists them)."""
    out: dict[str, Any] = {}
    for k, v in snap.items():
        if k == "state":
            out["changes"] = changes
        out[k] = v
    if "changes" not in out:
        out["changes"] = changes
    return out
