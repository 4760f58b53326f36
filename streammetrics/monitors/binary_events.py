"""The events form of a small ``BinaryMonitor`` state: its predictions themselves (issue 12).

A window of a sparse key holds a handful of predictions, yet its three parts' state (two
histograms, three exact sums with their residues, the confusion cells: ~60 JSON containers,
~1.3 kB for 10 events) costs more to build, encode and ship than the predictions it sums. A
monitor of at most ``BinaryMonitor.events_form_max`` predictions, each of weight 1, therefore
writes the predictions in canonical order (ascending score; at one score the unlabelled ones,
then ``y_true`` 0, then 1)::

    {"score": [0.12, 0.4, 0.4, 0.93], "y_true": [0, null, 1, 1]}

Every part's state is a function of this multiset (the histograms are exact while small; the
exact sums are exact), so :func:`load_events_form` rebuilds the same monitor by adding the
predictions back, and the form depends only on the multiset: per-event, batch, merge order
and round trips give the same bytes. Monitors outside it (a weight other than 1, a histogram
on the grid, units mode, a part inconsistent with the others) keep the parts' layout.

>>> from streammetrics.monitors.binary import BinaryMonitor
>>> m = BinaryMonitor().update({"y_true": 1, "score": 0.9}).update({"y_true": 0, "score": 0.25})
>>> m.to_dict()["state"]
{'score': [0.25, 0.9], 'y_true': [0, 1]}
>>> BinaryMonitor.from_dict(m.to_dict()) == m
True
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from streammetrics.core.state import describe

__all__ = ["EVENTS_FORM_MAX", "check_events_form", "events_form", "load_events_form", "signed_events_form"]

#: default most predictions a ``BinaryMonitor`` writes as the events form (its
#: ``events_form_max``); also the most such a dict may hold when read
EVENTS_FORM_MAX = 256
_KEYS = frozenset(("score", "y_true"))
_INF = math.inf
#: the confusion cells (y_true, y_pred) of the index ``y_true + 2 * y_pred``
_CELLS = ((0, 0), (1, 0), (0, 1), (1, 1))


def events_form(monitor: Any) -> dict[str, list] | None:
    """The events form of ``monitor``'s state, or None when it does not apply: more than
    ``monitor.events_form_max`` predictions, a weight other than 1 (a labelled event of
    another weight, or prediction weights that are not one whole weight per prediction), a
    histogram on the grid, or parts that disagree (then the parts' layout keeps them as they are)."""
    pr, sc, cm = monitor.predictions, monitor.scores, monitor.confusion
    n = pr.count
    if n > monitor.events_form_max or pr.bins_per_octave is not None or not sc.exact:
        return None
    if not sc.unit_weights or cm._n_weighted or not cm._unit:
        return None
    # (in units mode, entered when some weight was not whole, the weights as they are now: the
    # form depends on the state, not on the path that built it, so a loaded state writes it alike)
    pred_w, classes = pr.whole_weights(), sc.whole_weights()
    if pred_w is None or classes is None:
        return None
    neg_w, pos_w = classes
    if len(neg_w) > len(pred_w) or len(pos_w) > len(pred_w):
        return None
    scores: list[float] = []
    labels: list[int | None] = []
    threshold = monitor.threshold
    cells = [0, 0, 0, 0]  # index y_true + 2 * y_pred (:data:`_CELLS`)
    above = 0
    neg_get, pos_get = neg_w.get, pos_w.get
    for key in sorted(pred_w):
        p, a, b = pred_w[key], neg_get(key, 0), pos_get(key, 0)
        u = p - a - b
        if not (p >= 1 and u >= 0 and p.is_integer() and float(a).is_integer() and float(b).is_integer()):
            return None
        s = key + 0.0  # (a score of -0.0 is the score 0.0 on every path)
        u, a, b = int(u), int(a), int(b)
        scores += [s] * (u + a + b)
        labels += [None] * u + [0] * a + [1] * b
        if s >= threshold:
            above += u + a + b
            cells[2] += a
            cells[3] += b
        else:
            cells[0] += a
            cells[1] += b
    if len(scores) != n or (cells[0] + cells[2], cells[1] + cells[3]) != sc.class_counts:
        return None  # (a labelled score missing from the predictions: the sums above disagree)
    if above != pr.positive_weight or {c: k for c, k in zip(_CELLS, cells) if k} != {
            c: k for c, k in cm._n.items() if k}:
        return None
    return {"score": scores, "y_true": labels}


def signed_events_form(signed: list[float]) -> dict[str, list]:
    """The events form of a monitor in the small form: its queued signed scores (``v``: score
    ``abs(v)``, ``y_true`` ``v > 0``, every one strictly inside (-1, 1) and not 0) in canonical
    order (ascending score; at one score ``y_true`` 0, then 1).

    >>> signed_events_form([0.9, -0.25, 0.25])
    {'score': [0.25, 0.25, 0.9], 'y_true': [0, 1, 1]}
    """
    pairs = sorted([(-v, 0) if v < 0.0 else (v, 1) for v in signed])
    return {"score": [p[0] for p in pairs], "y_true": [p[1] for p in pairs]}


def _validated(state: Mapping[str, Any], cap: int) -> tuple[list, list]:
    """The ``score`` and ``y_true`` lists of an events-form ``state``, validated in full
    (ValueError naming the field)."""
    if set(state) != _KEYS:
        raise ValueError(f"an events-form state has the keys ['score', 'y_true'], got {sorted(map(str, state))[:20]}")
    scores, labels = state["score"], state["y_true"]
    if not isinstance(scores, list) or not isinstance(labels, list):
        raise ValueError(f"state['score'] and state['y_true'] must be lists, "
                         f"got {describe(scores)}, {describe(labels)}")
    if len(scores) != len(labels):
        raise ValueError(f"state['score'] and state['y_true'] differ in length: {len(scores)} != {len(labels)}")
    if len(scores) > cap:
        raise ValueError(f"state['score'] holds {len(scores)} predictions, more than events_form_max={cap}")
    for i, s in enumerate(scores):
        if s.__class__ is not float and s.__class__ is not int or not -_INF < s < _INF:
            raise ValueError(f"state['score'][{i}] must be a finite number, got {describe(s)}")
    for i, y in enumerate(labels):
        if y is not None and (y.__class__ is not int or not (y == 0 or y == 1)):
            raise ValueError(f"state['y_true'][{i}] must be 0, 1 or null, got {describe(y)}")
    return scores, labels


def check_events_form(state: Mapping[str, Any], cap: int) -> list[float] | None:
    """An events-form ``state`` validated in full (ValueError naming the field), as the small
    form's signed scores when every prediction is labelled with a float score strictly inside
    (0, 1); None when some is not (then :func:`load_events_form` adds them to the parts)."""
    scores, labels = _validated(state, cap)
    signed = []
    for s, y in zip(scores, labels):
        if y is None or s.__class__ is not float or not 0.0 < s < 1.0:
            return None
        signed.append(s if y else -s)
    return signed


def load_events_form(monitor: Any, state: Mapping[str, Any]) -> None:
    """Add the predictions of an events-form ``state`` to the empty ``monitor``'s parts, validated
    in full first (ValueError naming the field; nothing added)."""
    scores, labels = _validated(state, monitor.events_form_max)
    pr, sc, cm = monitor.predictions, monitor.scores, monitor.confusion
    threshold = monitor.threshold
    for s, y in zip(scores, labels):
        s = float(s)
        pr.update(s)
        if y is not None:
            sc.update(y, s)
            cm.update(y, 1 if s >= threshold else 0)
