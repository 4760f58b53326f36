"""``binary_snapshot_states``: many small binary windows closed in one vectorised pass (issue 12).

A fleet of sparse keys closes ~100,000 windows of ~10 events where one key closes a few
large ones. Window by window, each costs a monitor built from the template, its events applied
one by one, three exact sums folded and the state encoded: ~100 us of pure-Python work that
cache misses over thousands of live keys make slower still. Here the panes closing together
are concatenated into columns once and every per-window quantity comes from one numpy pass:

* one sort by (window, score, y_true): each window's events in the order of the events form
  (:mod:`~streammetrics.monitors.binary_events`, the state of such a window: its events), and
  its levels: per (window, score) the negative and positive counts (``np.add.reduceat``);
* the confusion cells, class counts and predicted positives: one ``np.bincount``;
* the metrics as numpy columns: the confusion metrics of
  :func:`~streammetrics.kernels.counts.binary_confusion_metrics`, and ROC AUC, its bounds and
  average precision of :func:`~streammetrics.kernels.ranking_small.ranking_summary` on rows of
  levels (unit weights make every intermediate a whole number, exact in any order; average
  precision adds its terms along each row in the one-window loop's order, so every value is
  the same float);
* the sums of log loss, Brier score and score: the per-event terms of
  :func:`~streammetrics.kernels.exact_sum.probability_terms` (the formula every path uses),
  summed per window by ``math.fsum`` (correctly rounded: the value the exact sums read,
  whatever the order of the terms).

The log loss, Brier score and mean score are those sums divided by the window's weight (one
IEEE division, as the one-window path), every metric a column, each window's snapshot a row
of them under :data:`~streammetrics.monitors.fast_snapshot.SNAPSHOT_KEYS`; the state is the
events form: the records equal ``(m.snapshot(), m.to_dict())`` of a
monitor ``m`` built from the template and given the pane's events
(``tests/monitors/test_fleet_snapshot.py`` holds the two to the same JSON). A pane outside the
common case (a weight other than 1, a label not 0/1, a score not strictly inside (0, 1), more
than :data:`FLEET_MAX_EVENTS` events or than the template's ``events_form_max``) gets None:
the caller builds that window's monitor.
"""
from __future__ import annotations

import math
from itertools import chain
from typing import Any, Sequence

import numpy as np

from streammetrics.kernels.exact_sum import probability_terms
from streammetrics.kernels.histogram_json import SMALL_KEYS
from streammetrics.kernels.ranking_small import SMALL_LEVELS
from streammetrics.monitors.fast_snapshot import _DIRECT, SNAPSHOT_KEYS

__all__ = ["FLEET_MAX_EVENTS", "binary_snapshot_states", "pack_binary_event"]

#: panes of at most this many events take the vectorised pass (their levels fit the one-pass
#: ranking and the small histogram encoding); larger ones are built window by window
FLEET_MAX_EVENTS = min(SMALL_LEVELS, SMALL_KEYS)
_fsum = math.fsum
_FLOAT = {float}


_ZERO_INT, _ONE_INT = 0, 1  # compared by identity (CPython's cached small ints)


def pack_binary_event(event: Any) -> Any:
    """The common binary event (weight 1, ``y_true`` the int 0 or 1 or a bool, a float score
    strictly inside (0, 1)) as its signed score, ``score`` if ``y_true`` else ``-score``: one
    float, from which both come back (``y_true = v > 0``, ``score = |v|``); any other event as
    itself. The form a window engine queues binary events in
    (:meth:`~streammetrics.monitors.binary.BinaryMonitor.pack_event`)."""
    s = event.score
    y = event.y_true
    if s.__class__ is float and 0.0 < s < 1.0 and event.weight == 1.0 and (
            y is _ONE_INT or y is _ZERO_INT or y is True or y is False):
        return s if y else -s
    return event


def _none_where(values: np.ndarray, undefined: np.ndarray) -> list:
    """``values`` as a list of floats, None where ``undefined``."""
    out = values.tolist()
    if undefined.any():
        for j in np.flatnonzero(undefined).tolist():
            out[j] = None
    return out


def _confusion_columns(cells: np.ndarray) -> dict[str, list]:
    """:func:`~streammetrics.kernels.counts.binary_confusion_metrics` of many windows of unit
    weights (``cells``: rows ``tn, fn, fp, tp`` as counts), as one list per metric. Every
    intermediate is a whole number below 2**53 (exact in any order), so each value is the same
    float as the one-window formula's: one IEEE division (or square root) of the same operands."""
    tn, fn, fp, tp = (cells[:, c].astype(np.float64) for c in range(4))
    n_true0, n_true1 = tn + fp, fn + tp
    total = n_true0 + n_true1  # > 0: every window holds an event
    pred0, pred1 = tn + fn, tp + fp
    with np.errstate(divide="ignore", invalid="ignore"):
        r0, r1 = tn / n_true0, tp / n_true1
        both = (n_true0 > 0) & (n_true1 > 0)
        balanced = np.where(both, (r0 + r1) / 2, np.where(n_true0 > 0, r0, r1))  # fsum of the defined / their number
        f1_den = n_true1 + pred1
        f1 = 2.0 * tp / f1_den
        # matthews_corrcoef: 0.0 for one class on either side, else cov / sqrt(var product)
        n_samples = pred0 + pred1
        square = n_samples * n_samples
        cov_ytyp = (tn + tp) * n_samples - (n_true0 * pred0 + n_true1 * pred1)
        product = (square - (pred0 * pred0 + pred1 * pred1)) * (square - (n_true0 * n_true0 + n_true1 * n_true1))
        mcc = np.where(both & (pred0 > 0) & (pred1 > 0) & (product != 0), cov_ytyp / np.sqrt(product), 0.0)
    return {
        "accuracy": ((tn + tp) / total).tolist(),
        "balanced_accuracy": balanced.tolist(),
        "precision": _none_where(tp / np.where(pred1 > 0, pred1, 1.0), pred1 == 0),
        "recall": _none_where(r1, n_true1 == 0),
        "f1": _none_where(f1, f1_den == 0),
        "specificity": _none_where(r0, n_true0 == 0),
        "matthews_corrcoef": mcc.tolist(),
        "positive_rate": (n_true1 / total).tolist(),
        "predicted_positive_rate": (pred1 / total).tolist(),
    }


def _ranking_columns(window_of_level: np.ndarray, neg: np.ndarray, pos: np.ndarray, m: int,
                     one_class: np.ndarray) -> dict[str, list]:
    """:func:`~streammetrics.kernels.ranking_small.ranking_summary` (exact levels) of ``m``
    windows of unit weights at once, one list per value; levels ascending within each window.
    The levels are laid out one row per window, highest first (zeros after a window's last):
    the AUC's sums are whole numbers (exact in any order), and average precision adds its
    terms column by column (``np.add.accumulate`` along a row: the same sequence of IEEE
    additions as the one-window loop)."""
    counts = np.bincount(window_of_level, minlength=m)
    width = int(counts.max())
    ends = np.cumsum(counts)
    descending = (ends[window_of_level] - 1) - np.arange(len(window_of_level))  # column, from the top
    shape = (m, width)
    n_rows = np.zeros(shape)
    p_rows = np.zeros(shape)
    n_rows[window_of_level, descending] = neg
    p_rows[window_of_level, descending] = pos
    tps = np.add.accumulate(p_rows, axis=1)
    fps = np.add.accumulate(n_rows, axis=1)
    total_p, total_n = tps[:, -1:], fps[:, -1:]
    real = np.arange(width)[None, :] < counts[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        recall = np.where(total_p > 0, tps / total_p, 1.0)
        prev = np.zeros(shape)
        prev[:, 1:] = recall[:, :-1]
        terms = np.where(real, (recall - prev) * (tps / (tps + fps)), 0.0)
        ap = np.maximum(0.0, np.add.accumulate(terms, axis=1)[:, -1])
        area = (n_rows * ((tps - p_rows) * 2.0 + p_rows)).sum(axis=1)  # whole numbers: exact
        auc = area / (2.0 * total_n[:, 0] * total_p[:, 0])
    slack = (4.0 * counts + 32.0) * 2.0**-52  # ranking.rounding_slack of each window's levels
    return {
        "roc_auc": _none_where(auc, one_class),
        "roc_auc_low": _none_where(np.maximum(0.0, auc - slack), one_class),
        "roc_auc_high": _none_where(np.minimum(1.0, auc + slack), one_class),
        "average_precision": ap.tolist(),
    }


def _common_columns(panes: Sequence[Sequence[Any]], cap: int) -> tuple[list[int], np.ndarray, np.ndarray, np.ndarray]:
    """``(indexes of the panes in the common case, their lengths, y_true as int64, score)``,
    the two columns over those panes' events in order. A pane's items are packed events
    (signed scores, :func:`pack_binary_event`) or events, packed here; a pane is in the common
    case when every item packs to a float and it holds 1 to ``cap`` of them."""
    items = list(chain.from_iterable(panes))
    sizes = np.fromiter(map(len, panes), dtype=np.int64, count=len(panes))
    if not set(map(type, items)) <= _FLOAT:  # events given as events, or some not in the common case
        items = [x if x.__class__ is float else pack_binary_event(x) for x in items]
        items = [x if x.__class__ is float else math.nan for x in items]
    signed = np.array(items, dtype=np.float64)
    pane_of = np.repeat(np.arange(len(panes), dtype=np.int64), sizes)
    ok = (np.bincount(pane_of[np.isnan(signed)], minlength=len(panes)) == 0) & (sizes > 0) & (sizes <= cap)
    if not ok.all():
        signed = signed[ok[pane_of]]
    return np.flatnonzero(ok).tolist(), sizes[ok], (signed > 0.0).view(np.int8).astype(np.int64), np.abs(signed)


def binary_snapshot_states(template: Any, panes: Sequence[Sequence[Any]]) -> list[tuple[dict, dict] | None]:
    """Per pane (a list of parsed events): ``(snapshot(), to_dict())`` of a new monitor of
    ``template``'s configuration (an empty ``BinaryMonitor`` with ``exact=False``) given the
    pane's events, or None for a pane outside the common case (see the module)."""
    out: list[tuple[dict, dict] | None] = [None] * len(panes)
    if not (_DIRECT and not template.exact and template.count == 0 and not template.labeled):
        return out
    chosen, lengths, y, s = _common_columns(panes, template.snapshot_states_max_events)
    if not chosen:
        return out
    n = len(s)
    m = len(chosen)
    win = np.repeat(np.arange(m, dtype=np.int64), lengths)
    above = s >= template.threshold
    # the events in the events form's order (per window: by score, then y_true), and the
    # levels: distinct scores per window, ascending, with their negative / positive counts
    order = np.lexsort(((s.view(np.int64) << 1) | y, win))  # (a score in (0, 1): its bits ascend with it)
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
    log_all, brier_all, score_all, label_all = log_terms.tolist(), brier_terms.tolist(), ss.tolist(), ys.tolist()
    ends = np.cumsum(lengths)
    cuts = list(map(slice, (ends - lengths).tolist(), ends.tolist()))  # each window's events
    # the metrics: one list per key of the snapshot (None where undefined), then one row per window
    cells = np.bincount(win * 4 + y + 2 * above, minlength=4 * m).reshape(m, 4)  # true + 2 * predicted
    columns = _confusion_columns(cells)
    one_class = (cells[:, 0] + cells[:, 2] == 0) | (cells[:, 1] + cells[:, 3] == 0)
    columns.update(_ranking_columns(ws[starts], neg.astype(np.float64), pos.astype(np.float64), m, one_class))
    totals = lengths.astype(np.float64)  # the weight of every prediction, of the labelled ones
    columns["count"], columns["total_weight"] = lengths.tolist(), totals.tolist()
    for key, terms in (("log_loss", log_all), ("brier_score", brier_all), ("mean_score", score_all)):
        sums = np.fromiter(map(_fsum, map(terms.__getitem__, cuts)), dtype=np.float64, count=m)
        columns[key] = (sums / totals).tolist()  # one IEEE division each
    rows = zip(*(columns[k] for k in SNAPSHOT_KEYS))
    name, version, config = template.type_name, template.version, template._config
    for i, row, cut in zip(chosen, rows, cuts):
        out[i] = (dict(zip(SNAPSHOT_KEYS, row)), {"type": name, "version": version, "config": config(),
                                                  "state": {"score": score_all[cut], "y_true": label_all[cut]}})
    return out
