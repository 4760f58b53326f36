"""``binary_snapshot_states``: many small binary windows closed in one vectorised pass (issue 12).

A fleet of sparse keys closes ~100,000 windows of ~10 events where one key closes a few
large ones. Window by window, each costs a monitor built from the template, its events applied
one by one, three exact sums folded and the state encoded: ~100 us of pure-Python work that
cache misses over thousands of live keys make slower still. Here the panes closing together
are concatenated into columns once and every per-window quantity comes from one numpy pass:

* levels: one sort by (window, score); per (window, score) the negative and positive counts
  (``np.add.reduceat``), split per window by offsets (the exact histograms of a small window);
* the confusion cells, class counts and predicted positives: one ``np.bincount`` each;
* the exact sums (log loss, Brier score, score sum): the per-event terms of
  :func:`~streammetrics.kernels.exact_sum.probability_terms` (the formula every path uses), then
  their canonical expansion per window by ``math.fsum`` (correctly rounded: the expansion
  the exact sums write, whatever the order of the terms).

The metrics and state are then written by the functions the one-window path uses
(:func:`~streammetrics.monitors.fast_snapshot.metrics_of`,
:func:`~streammetrics.monitors.fast_snapshot.state_of`): the records equal
``(m.snapshot(), m.to_dict())`` of a monitor ``m`` built from the template and given the pane's
events (``tests/monitors/test_fleet_snapshot.py`` holds the two to the same JSON). A pane
outside the common case (a weight other than 1, a label absent or not 0/1, a score not strictly
inside (0, 1), more events than a small window's levels) gets None: the caller builds that one
window by window.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from streammetrics.kernels.exact_sum import probability_terms, to_pair
from streammetrics.kernels.histogram_json import SMALL_KEYS
from streammetrics.kernels.ranking_small import SMALL_LEVELS, ranking_summary
from streammetrics.monitors.fast_snapshot import _DIRECT, metrics_of, state_of

__all__ = ["FLEET_MAX_EVENTS", "binary_snapshot_states"]

#: panes of at most this many events take the vectorised pass (their levels fit the one-pass
#: ranking and the small histogram encoding); larger ones are built window by window
FLEET_MAX_EVENTS = min(SMALL_LEVELS, SMALL_KEYS)
_fsum = math.fsum


def _eligible(events: Sequence[Any]) -> bool:
    """Every event of weight 1, label 0 or 1, a float score strictly inside (0, 1)."""
    if not 0 < len(events) <= FLEET_MAX_EVENTS:
        return False
    for e in events:
        s = e.score
        if not (e.weight == 1.0 and s.__class__ is float and 0.0 < s < 1.0 and (e.y_true == 0 or e.y_true == 1)):
            return False
    return True


def _parts(terms: list[float]) -> tuple[float, list[list[int]]]:
    """``ExactSum.parts()`` of the exact sum of a few finite ``terms``: the canonical expansion
    ``c_0 = round(sum)``, ``c_k = round(sum - c_0 - ... - c_{k-1})`` until nothing is left,
    each by ``math.fsum`` (correctly rounded, half to even, as
    :func:`~streammetrics.kernels.exact_sum.expansion_of`)."""
    value = _fsum(terms)
    rest = [*terms, -value]
    c = _fsum(rest)
    if not c:
        return value, []
    residue = []
    while c:
        residue.append(to_pair(c))
        rest.append(-c)
        c = _fsum(rest)
    return value, residue


def binary_snapshot_states(template: Any, panes: Sequence[Sequence[Any]]) -> list[tuple[dict, dict] | None]:
    """Per pane (a list of parsed events): ``(snapshot(), to_dict())`` of a new monitor of
    ``template``'s configuration (an empty ``BinaryMonitor`` with ``exact=False``) given the
    pane's events, or None for a pane outside the common case (see the module)."""
    out: list[tuple[dict, dict] | None] = [None] * len(panes)
    if not (_DIRECT and not template.exact and template.count == 0 and not template.labeled):
        return out
    chosen = [i for i, events in enumerate(panes) if _eligible(events)]
    if not chosen:
        return out
    lengths = np.fromiter((len(panes[i]) for i in chosen), dtype=np.int64, count=len(chosen))
    n = int(lengths.sum())
    m = len(chosen)
    y = np.fromiter((e.y_true for i in chosen for e in panes[i]), dtype=np.int64, count=n)
    s = np.fromiter((e.score for i in chosen for e in panes[i]), dtype=np.float64, count=n)
    win = np.repeat(np.arange(m, dtype=np.int64), lengths)
    above = s >= template.threshold
    # confusion cells (true + 2 * predicted) and the class counts, per window
    cells = np.bincount(win * 4 + y + 2 * above, minlength=4 * m).reshape(m, 4).tolist()
    # levels: distinct scores per window, ascending, with their negative / positive counts
    order = np.lexsort((s, win))
    ws, ss, ys = win[order], s[order], y[order]
    new = np.empty(n, dtype=bool)
    new[0] = True
    np.not_equal(ss[1:], ss[:-1], out=new[1:])
    new[1:] |= ws[1:] != ws[:-1]
    starts = np.flatnonzero(new)
    pos = np.add.reduceat(ys, starts)
    neg = np.add.reduceat(1 - ys, starts)
    level_ends = np.cumsum(np.bincount(ws[starts], minlength=m)).tolist()
    scores_all = ss[starts].tolist()
    neg_all = neg.astype(np.float64).tolist()
    pos_all = pos.astype(np.float64).tolist()
    neg_int, pos_int, both_int = neg.tolist(), pos.tolist(), (neg + pos).tolist()
    # exact sums: the per-event terms every path computes, summed exactly per window
    log_terms, brier_terms = probability_terms(np.where(y == 1, s, -s))
    log_all, brier_all, score_all = log_terms.tolist(), brier_terms.tolist(), s.tolist()
    event_ends = np.cumsum(lengths).tolist()
    cm = template.confusion
    begin = first = 0
    for j, i in enumerate(chosen):
        end = level_ends[j]
        last = event_ends[j]
        tn, fn, fp, tp = cells[j]  # index true + 2 * predicted: (0,0), (1,0), (0,1), (1,1)
        n0, n1 = tn + fp, fn + tp
        count = n0 + n1
        neg_j, pos_j = neg_all[begin:end], pos_all[begin:end]
        rank = ranking_summary(neg_j, pos_j, None)
        if not (n0 and n1):  # BinaryScores.roc_auc: undefined once a class has no events
            rank["roc_auc"] = rank["roc_auc_low"] = rank["roc_auc_high"] = None
        log_sum, log_residue = _parts(log_all[first:last])
        brier_sum, brier_residue = _parts(brier_all[first:last])
        score_sum, score_residue = _parts(score_all[first:last])
        total = float(count)
        positive = float(fp + tp)
        metrics = metrics_of(count, total, positive, total, (float(tn), float(fp), float(fn), float(tp)),
                             False, rank, log_sum, brier_sum, score_sum)
        scores = scores_all[begin:end]
        confusion = {
            "type": cm.type_name, "version": cm.version, "config": cm._config(),
            "state": {"unit_weights": True, "count": count, "total_weight": total,
                      "cells": [[t, p, float(c)] for (t, p), c in (((0, 0), tn), ((0, 1), fp), ((1, 0), fn),
                                                                  ((1, 1), tp)) if c]},
        }
        state = state_of(template, {
            "count": count, "total_weight": total, "score_sum": score_sum, "positive_weight": positive,
            "score_sum_residue": score_residue or None, "bins_per_octave": None,
            "histogram": {"scores": list(scores), "weights": both_int[begin:end]},
        }, {
            "events": [n0, n1], "weights": [float(n0), float(n1)], "weighted": [0, 0, 0.0, 0.0],
            "log_loss_sum": log_sum, "brier_sum": brier_sum,
            "sum_residues": [log_residue, brier_residue] if log_residue or brier_residue else None,
            "outside_unit": None, "bins_per_octave": None,
            "histogram": {"scores": scores, "neg": neg_int[begin:end], "pos": pos_int[begin:end]},
        }, confusion)
        out[i] = (metrics, state)
        begin, first = end, last
    return out
