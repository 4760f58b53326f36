"""Group fairness of binary predictions from per-group confusion cells (issue 28, point 4).

Each group (a value of the sensitive dimension) is its four confusion weights ``tn``, ``fp``,
``fn``, ``tp`` (labelled events, predictions ``score >= threshold``). With fairlearn's
definitions (``fairlearn.metrics``, version 0.10 and later):

* selection rate ``(fp + tp) / (tn + fp + fn + tp)``;
* TPR ``tp / (tp + fn)`` and FPR ``fp / (fp + tn)``, taken as 0 for a group without positives
  (negatives), as ``sklearn.metrics.confusion_matrix(normalize="true")`` does for fairlearn;
* ``demographic_parity_difference``: max - min selection rate over the groups;
* ``demographic_parity_ratio``: min / max selection rate (0 when the max is 0, fairlearn's
  zero-division value);
* ``equalized_odds_difference``: the larger of the TPR and FPR differences (max - min).

Groups without weight are left out (fairlearn never sees them). In ``groups`` a rate of a group
without the events it needs is null (the aggregates used 0, as fairlearn does).
"""
from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["fairness"]


def _rate(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def fairness(groups: Mapping[str, tuple[float, ...]]) -> dict[str, Any]:
    """``{"demographic_parity_difference", "demographic_parity_ratio",
    "equalized_odds_difference", "groups": {value: {selection_rate, tpr, fpr, count}}}`` of
    ``groups``: value -> ``(tn, fp, fn, tp)`` weights (plus, optionally, a fifth item: the
    group's event count; else the summed weight is the count). None for the aggregates when no
    group has weight."""
    rows: dict[str, dict[str, Any]] = {}
    selection: list[float] = []
    tprs: list[float] = []
    fprs: list[float] = []
    for value, cells in groups.items():
        tn, fp, fn, tp = (float(c) for c in cells[:4])
        total = tn + fp + fn + tp
        count = cells[4] if len(cells) > 4 else total
        if not total > 0:
            continue
        sel = (fp + tp) / total
        tpr, fpr = _rate(tp, tp + fn), _rate(fp, fp + tn)
        rows[value] = {"selection_rate": sel, "tpr": tpr, "fpr": fpr, "count": count}
        selection.append(sel)
        tprs.append(0.0 if tpr is None else tpr)
        fprs.append(0.0 if fpr is None else fpr)
    if not rows:
        return {"demographic_parity_difference": None, "demographic_parity_ratio": None,
                "equalized_odds_difference": None, "groups": {}}
    high, low = max(selection), min(selection)
    ratio = low / high if high > 0 else 0.0
    eod = max(max(tprs) - min(tprs), max(fprs) - min(fprs))
    out = {"demographic_parity_difference": high - low, "demographic_parity_ratio": ratio,
           "equalized_odds_difference": eod, "groups": rows}
    assert all(math.isfinite(v) for v in (high - low, ratio, eod))
    return out
