"""``binary_snapshot_states``: many small binary windows in one vectorised pass (issue 12).

A fleet of sparse keys closes ~100,000 windows of ~10 events where one key closes a few
large ones. Window by window, each costs a monitor built from the template, its events applied
one by one, three exact sums folded and the state encoded: ~100 us of pure-Python work that
cache misses over thousands of live keys make slower still. Here the panes closing together
are concatenated into columns once and every per-window quantity comes from one numpy pass:

* one sort by (window, score, y_true) (two plain argsorts): each window's events in the order of the events form
  (:mod:`~streammetrics.monitors.binary_events`, the state of such a window: its events), and
  its levels: per (window, score) the negative and positive counts (``np.add.reduceat``);
* the confusion cells, class counts and predicted positives: one ``np.bincount``;
* the metrics as numpy columns: the vectorised twins of the confusion metrics
  (:func:`~streammetrics.kernels.counts.binary_confusion_columns`) and of ROC AUC, its bounds and
  average precision (:func:`~streammetrics.kernels.ranking_small.ranking_summary_columns`) on rows of
  levels (unit weights make every intermediate a whole number, exact in any order; average
  precision adds its terms along each row in the one-window loop's order, so every value is
  the same float);
* the sums of log loss, Brier score and score: the per-event terms of
  :func:`~streammetrics.kernels.exact_sum.probability_terms` (the formula every path uses),
  summed per window by :func:`~streammetrics.kernels.exact_sum.run_sums` (``math.fsum``'s
  vectorised twin, correctly rounded: the value the exact sums read, whatever the order of
  the terms).

The log loss, Brier score and mean score are those sums divided by the window's weight (one
IEEE division, as the one-window path), every metric a column, each window's snapshot a row
of them under :data:`~streammetrics.monitors.fast_snapshot.SNAPSHOT_KEYS`; the state is the
events form. Each pane is a ``BinaryMonitor``'s small form, its queue of signed scores (``score``
if ``y_true`` else ``-score``: the columns come from one float array), of 1 to
:data:`FLEET_MAX_EVENTS` events: ``BinaryMonitor.snapshot_many`` chooses them, and its records
equal ``(m.snapshot(), m.to_dict(), m.intervals())`` computed from the monitor's parts
(``tests/monitors/test_fleet_snapshot.py`` holds the two to the same JSON). For a caller that
only writes the snapshot lines (replay), :func:`binary_snapshot_texts` gives each window's
metrics and state as JSON text without a dict per window: with msgspec, every window's
metrics in one encoder call (a struct per window) and its scores and labels in one call each,
the result split per window; ``snapshot_line`` of the records, byte for byte.
"""
from __future__ import annotations

import json
from itertools import chain
from typing import Any, Sequence

import numpy as np

from streammetrics.kernels.counts import binary_confusion_columns
from streammetrics.kernels.exact_sum import probability_terms, run_sums
from streammetrics.kernels.histogram_json import SMALL_KEYS
from streammetrics.kernels.intervals import (
    BINARY_INTERVALS,
    binary_interval_columns,
    interval_record,
    intervals_text,
    z_value,
)
from streammetrics.kernels.ranking_small import SMALL_LEVELS, ranking_summary_columns
from streammetrics.monitors.fast_snapshot import SNAPSHOT_KEYS

__all__ = ["FLEET_MAX_EVENTS", "binary_snapshot_states", "binary_snapshot_texts"]

#: panes of at most this many events take the vectorised pass (their levels fit the one-pass
#: ranking and the small histogram encoding); larger ones are built window by window
FLEET_MAX_EVENTS = min(SMALL_LEVELS, SMALL_KEYS)


def _none_where(values: np.ndarray, undefined: np.ndarray, arrays: list) -> list:
    """``values`` as a list of floats, None where ``undefined`` (both noted in ``arrays``)."""
    arrays.append((values, undefined))
    out = values.tolist()
    if undefined.any():
        for j in np.flatnonzero(undefined).tolist():
            out[j] = None
    return out


def _listed(values: np.ndarray, arrays: list) -> list:
    """``values`` as a list of floats (noted in ``arrays``)."""
    arrays.append((values, None))
    return values.tolist()


def _lists(columns: dict[str, tuple[np.ndarray, np.ndarray | None]], arrays: list) -> dict[str, list]:
    """A kernel's columns (values, where undefined or None) as lists of floats, None where
    undefined; each column noted in ``arrays``."""
    return {name: _none_where(values, undefined, arrays) if undefined is not None else _listed(values, arrays)
            for name, (values, undefined) in columns.items()}


def _common_columns(panes: Sequence[Sequence[float]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(the panes' lengths, y_true as int64, score)`` over the panes' signed scores in order
    (each pane: a monitor's small form, its queue of signed scores)."""
    sizes = np.fromiter(map(len, panes), dtype=np.int64, count=len(panes))
    signed = np.fromiter(chain.from_iterable(panes), dtype=np.float64, count=int(sizes.sum()))
    return sizes, (signed > 0.0).view(np.int8).astype(np.int64), np.abs(signed)


class _Columns:
    """What :func:`binary_snapshot_states` and :func:`binary_snapshot_texts` render: the panes
    in the common case (``chosen``), one list per snapshot key (None where undefined), and
    each window's events in the events form's order (``scores[cut]``, ``labels[cut]``)."""

    __slots__ = ("arrays", "chosen", "columns", "cuts", "intervals", "labels", "lengths", "score_array", "scores")

    def __init__(self, chosen: list[int], columns: dict[str, list], scores: list, labels: list,
                 cuts: list[slice], arrays: list, score_array: np.ndarray, lengths: np.ndarray,
                 intervals: "_Intervals") -> None:
        self.chosen, self.columns, self.scores, self.labels, self.cuts = chosen, columns, scores, labels, cuts
        #: each window's intervals record and text (``BinaryMonitor.intervals``: contract section 9)
        self.intervals = intervals
        #: the float columns as arrays, each with where it is undefined (or None)
        self.arrays, self.score_array, self.lengths = arrays, score_array, lengths


def _fleet_columns(template: Any, panes: Sequence[Sequence[Any]]) -> _Columns | None:
    """The per-window metrics and events of the panes in the common case (None: none is, or
    the template is not an empty ``exact=False`` monitor); see the module docstring."""
    if template.exact or not panes:
        return None
    lengths, y, s = _common_columns(panes)
    chosen = list(range(len(panes)))
    n = len(s)
    m = len(chosen)
    win = np.repeat(np.arange(m, dtype=np.int64), lengths)
    above = s >= template.threshold
    # the events in the events form's order (per window: by score, then y_true), and the
    # levels: distinct scores per window, ascending, with their negative / positive counts
    # (a score in [0, 1]: its bits ascend with it): the events ranked by (score, y_true) by one
    # unstable sort (equal keys are equal events), then by (window, rank), distinct keys: two
    # plain sorts, ~3x faster than a stable lexsort
    by_key = np.argsort((s.view(np.int64) << 1) | y)
    rank = np.empty(n, dtype=np.int64)
    rank[by_key] = np.arange(n, dtype=np.int64)
    order = np.argsort(win * n + rank)
    ws, ss, ys = win[order], s[order], y[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ss[1:], ss[:-1], out=new[1:])
    new[1:] |= ws[1:] != ws[:-1]
    starts = np.flatnonzero(new)
    pos = np.add.reduceat(ys, starts)
    neg = np.add.reduceat(1 - ys, starts)
    # exact sums: the per-event terms every path computes, each window's correctly rounded sum
    log_terms, brier_terms = probability_terms(np.where(ys == 1, ss, -ss))
    score_all, label_all = ss.tolist(), ys.tolist()
    ends = np.cumsum(lengths)
    cuts = list(map(slice, (ends - lengths).tolist(), ends.tolist()))  # each window's events
    # the metrics: one list per key of the snapshot (None where undefined)
    cells = np.bincount(win * 4 + y + 2 * above, minlength=4 * m).reshape(m, 4)  # true + 2 * predicted
    arrays: list = []
    columns = _lists(binary_confusion_columns(cells[:, 0], cells[:, 2], cells[:, 1], cells[:, 3]), arrays)
    one_class = (cells[:, 0] + cells[:, 2] == 0) | (cells[:, 1] + cells[:, 3] == 0)
    columns.update(_lists(ranking_summary_columns(ws[starts], neg.astype(np.float64), pos.astype(np.float64), m,
                                                  one_class), arrays))
    totals = lengths.astype(np.float64)  # the weight of every prediction, of the labelled ones
    columns["count"], columns["total_weight"] = lengths.tolist(), _listed(totals, arrays)
    sums = run_sums(np.concatenate((log_terms, brier_terms, ss)), np.tile(lengths, 3)).reshape(3, m)
    for key, window_sums in zip(("log_loss", "brier_score", "mean_score"), sums):
        columns[key] = _listed(window_sums / totals, arrays)  # one IEEE division each
    # the intervals: the kernel BinaryMonitor.intervals calls, on every window's levels at once
    level_window = ws[starts]
    window_levels = np.flatnonzero(np.r_[True, level_window[1:] != level_window[:-1]])
    level_scores = ss[starts]
    confidence = template.confidence
    tn, fn, fp, tp = (cells[:, c] for c in range(4))
    low, high, log_loss, brier = (np.array(columns[k], dtype=np.float64) for k in (
        "roc_auc_low", "roc_auc_high", "log_loss", "brier_score"))  # (None: nan)
    interval_columns = binary_interval_columns(
        np.stack([tn, fp, fn, tp], axis=1), window_levels, level_scores, level_scores, neg.astype(np.float64),
        pos.astype(np.float64), low, high, log_loss, brier, lengths, fp + tp, z_value(confidence))
    # windows without any interval (the small ones: most of a fleet) share one record and text
    given = np.zeros(m, dtype=bool)
    for name in BINARY_INTERVALS:
        given |= ~np.isnan(interval_columns[name][0])
    intervals = _Intervals(interval_columns, given, confidence)
    return _Columns(chosen, columns, score_all, label_all, cuts, arrays, ss, lengths, intervals)


#: records read from the interval arrays before they are listed (the texts' few odd windows: none)
_LIST_AFTER = 64


class _Intervals:
    """Each window's intervals record (``BinaryMonitor.intervals``: contract section 9) and its
    text, from the interval columns; a window without any interval gets a fresh copy of the
    all-null record and the one all-null text."""

    __slots__ = ("columns", "confidence", "given", "listed", "null", "null_text", "reads")

    def __init__(self, columns: dict[str, Any], given: np.ndarray, confidence: float) -> None:
        self.columns, self.given, self.confidence = columns, given.tolist(), confidence
        self.listed: dict[str, Any] | None = None  # the columns as lists of floats, once many records are read
        self.reads = 0
        self.null = interval_record(BINARY_INTERVALS, None, 0, confidence)
        self.null_text = intervals_text(self.null)

    def record(self, j: int) -> dict[str, Any]:
        if self.given[j]:
            self.reads += 1
            if self.listed is None and self.reads > _LIST_AFTER:  # (a list's float is read ~10x faster)
                self.listed = {name: (lo.tolist(), hi.tolist()) for name, (lo, hi) in self.columns.items()}
            return interval_record(BINARY_INTERVALS, self.listed or self.columns, j, self.confidence)
        return {"intervals": dict(self.null["intervals"]), "insufficient": list(self.null["insufficient"])}

    def text(self, j: int) -> str:
        return intervals_text(self.record(j)) if self.given[j] else self.null_text

    def texts(self) -> list[str]:
        """:meth:`text` of every window in one pass: the windows grouped by which intervals they
        have (one text template per pattern, made once), their bounds written by one encoder call
        (split at ``,``: numbers only), each window's text one ``%`` of its pattern. A window
        holding a bound the encoder may write otherwise than json (:func:`_unlike_repr`) gets
        :meth:`text`."""
        m = len(self.given)
        if _encode is None or not any(self.given):
            return [self.text(j) for j in range(m)]
        columns = self.columns
        bounds = np.empty((m, 2 * len(BINARY_INTERVALS)))
        for c, name in enumerate(BINARY_INTERVALS):
            bounds[:, 2 * c], bounds[:, 2 * c + 1] = columns[name]
        defined = ~np.isnan(bounds)
        has = defined[:, 0::2] & defined[:, 1::2]  # (an interval with a nan end is None)
        weights = 1 << np.arange(len(BINARY_INTERVALS), dtype=np.int64)
        pattern = (has.astype(np.int64) * weights).sum(axis=1)
        mask = np.repeat(has, 2, axis=1)
        odd = (_unlike_repr(np.where(mask, bounds, 0.0))).any(axis=1)
        numbers = bounds[mask]
        texts = _encode(numbers.tolist()).decode("ascii")[1:-1].split(",") if len(numbers) else []
        sizes = (2 * has.sum(axis=1)).tolist()
        templates: dict[int, str] = {}
        confidence = _dumps(self.confidence)
        out = []
        at = 0
        for p, size in zip(pattern.tolist(), sizes):
            template = templates.get(p)
            if template is None:
                parts = [f'"{name}":[%s,%s]' if p >> c & 1 else f'"{name}":null'
                         for c, name in enumerate(BINARY_INTERVALS)]
                missing = ",".join(f'"{name}"' for c, name in enumerate(BINARY_INTERVALS) if not p >> c & 1)
                template = templates[p] = (',"intervals":{"confidence":' + confidence + "," + ",".join(parts)
                                           + '},"insufficient":[' + missing + "]")
            out.append(template % tuple(texts[at:at + size]) if size else template)
            at += size
        if odd.any():
            for j in np.flatnonzero(odd).tolist():
                out[j] = self.text(j)
        return out


def _config_of(template: Any) -> dict[str, Any]:
    """The ``config`` of the template's ``to_dict`` (the windows share its configuration)."""
    return template.to_dict()["config"]


def _records(template: Any, fleet: _Columns, windows: list[int] | None = None) -> list[tuple[dict, dict, dict]]:
    """``(snapshot(), to_dict(), intervals())`` of every window, or of ``windows`` (indexes into
    ``fleet.chosen``), in order."""
    columns, scores, labels = fleet.columns, fleet.scores, fleet.labels
    rows: Any = zip(*(columns[k] for k in SNAPSHOT_KEYS))
    cuts = fleet.cuts
    record = fleet.intervals.record
    intervals: Any = map(record, range(len(cuts)))
    if windows is not None:  # a few windows: their rows only
        rows = ([columns[k][j] for k in SNAPSHOT_KEYS] for j in windows)
        cuts = [cuts[j] for j in windows]
        intervals = map(record, windows)
    name, version, settings = template.type_name, template.version, _config_of(template)
    return [(dict(zip(SNAPSHOT_KEYS, row)), {"type": name, "version": version, "config": dict(settings),
                                             "state": {"score": scores[cut], "y_true": labels[cut]}}, record)
            for row, cut, record in zip(rows, cuts, intervals)]


def binary_snapshot_states(template: Any, panes: Sequence[Sequence[Any]]) -> list[tuple[dict, dict, dict] | None]:
    """Per pane (a list of parsed events or their packed forms): ``(snapshot(), to_dict(),
    intervals())`` of a new monitor of ``template``'s configuration (an empty ``BinaryMonitor`` with
    ``exact=False``) given the pane's events, or None for a pane outside the common case (see
    the module)."""
    out: list[tuple[dict, dict, dict] | None] = [None] * len(panes)
    fleet = _fleet_columns(template, panes)
    if fleet is not None:
        for i, record in zip(fleet.chosen, _records(template, fleet)):
            out[i] = record
    return out


try:  # the ``fast`` extra: every window's texts from two encoder calls
    import msgspec

    _encode: Any = msgspec.json.Encoder().encode
    #: a window's metrics, encoded as a JSON object with :data:`SNAPSHOT_KEYS` in order
    _Metrics: Any = msgspec.defstruct("_Metrics", list(SNAPSHOT_KEYS))
except ImportError:  # pragma: no cover - exercised where msgspec is absent
    _encode = _Metrics = None
_dumps = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode  # snapshot_line's canonical form
#: floats the encoder writes as ``repr`` does (and so as json does): 0 and magnitudes in [1e-4, 1e16)
_REPR_LOW, _REPR_HIGH = 1e-4, 1e16


def _unlike_repr(values: np.ndarray) -> np.ndarray:
    """Where the encoder may write a float otherwise than ``repr`` (``0.00001`` / ``1e-05``)."""
    magnitude = np.abs(values)
    return ((magnitude < _REPR_LOW) & (magnitude > 0.0)) | ~(magnitude < _REPR_HIGH)


def binary_snapshot_texts(template: Any, panes: Sequence[Sequence[Any]]) -> list[tuple[str, str, str] | None]:
    """:func:`binary_snapshot_states` as JSON text: per pane ``(metrics, state, intervals)``, the
    first two the compact ``json.dumps`` of that dict (what ``snapshot_line`` writes for it), the
    third the ``intervals`` and ``insufficient`` fields as ``window_line`` inserts them
    (:func:`~streammetrics.stream.snapshots.intervals_text`), or None where
    :func:`binary_snapshot_states` gives None. With msgspec, every window's metrics are encoded
    in one call (a struct per window, split at ``},{``: the objects hold numbers only) and
    every window's scores and labels in one each (split at ``],[``); a window holding a float the
    encoder may write otherwise than json (below 1e-4 or from 1e16, or not finite) is written
    by json from its dicts instead. Without msgspec, json writes every window from its dicts."""
    out: list[tuple[str, str, str] | None] = [None] * len(panes)
    fleet = _fleet_columns(template, panes)
    if fleet is None:
        return out
    if _encode is None:
        for i, (metrics, state, record) in zip(fleet.chosen, _records(template, fleet)):
            out[i] = (_dumps(metrics), _dumps(state), intervals_text(record))
        return out
    columns, cuts, scores, labels = fleet.columns, fleet.cuts, fleet.scores, fleet.labels
    odd = np.zeros(len(cuts), dtype=bool)  # the windows json writes
    for values, undefined in fleet.arrays:
        unlike = _unlike_repr(values)
        odd |= unlike if undefined is None else unlike & ~undefined
    events_unlike = _unlike_repr(fleet.score_array)
    if events_unlike.any():
        odd |= np.add.reduceat(events_unlike, np.cumsum(fleet.lengths) - fleet.lengths) > 0
    metrics = _encode(list(map(_Metrics, *(columns[k] for k in SNAPSHOT_KEYS)))).decode("ascii")[2:-2].split("},{")
    score_texts = _encode(list(map(scores.__getitem__, cuts))).decode("ascii")[2:-2].split("],[")
    label_texts = _encode(list(map(labels.__getitem__, cuts))).decode("ascii")[2:-2].split("],[")
    head = f'{{"type":{_dumps(template.type_name)},"version":{int(template.version)},' \
           f'"config":{_dumps(_config_of(template))},"state":{{"score":['
    out[:] = [("{" + metric_text + "}", head + score_text + '],"y_true":[' + label_text + "]}}", intervals)
              for metric_text, score_text, label_text, intervals in zip(metrics, score_texts, label_texts,
                                                                        fleet.intervals.texts())]
    if odd.any():
        windows = np.flatnonzero(odd).tolist()
        for j, (metrics_dict, state, record) in zip(windows, _records(template, fleet, windows)):
            out[fleet.chosen[j]] = (_dumps(metrics_dict), _dumps(state), intervals_text(record))
    return out
