"""``MulticlassMonitor``: a multiclass classifier's score vectors (``y_true``, ``scores``)."""
from __future__ import annotations

import warnings
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core.state import Field, decode_list, describe
from streammetrics.events.parser import Event
from streammetrics.kernels.exact_sum import ExactSum, add_rows
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors.base import Monitor, batch_weights, json_number, part, quiet
from streammetrics.monitors.labels import class_report, label_metrics

__all__ = ["MulticlassMonitor"]


def _k(m: Any) -> int:
    return len(m.classes)


def _merge_sums(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if mine is None or theirs is None:
        return None  # unknown on either side (state read from a version-1 dict)
    for a, b in zip(mine, theirs):
        a.merge(b)  # exact sums (kernels.exact_sum): independent of the merge order
    return mine


def _encode_sums(v: list | None, m: Any) -> tuple:
    """The rounded per-class sums and the rest of their exact expansions (null when none)."""
    if v is None:
        return None, None
    exp = [s.expansion() for s in v]
    residues = [e[1:] for e in exp]
    return [e[0] for e in exp], (residues if any(residues) else None)


def _decode_sums(raw: tuple, m: Any, loaded: Mapping[str, Any]) -> list | None:
    values, residues = raw
    if values is None:
        return None
    if not isinstance(values, list) or len(values) != _k(m):
        raise ValueError(f"must be null or a list of {_k(m)} numbers, got {describe(values)}")
    values = decode_list(values, "number", _k(m))
    if residues is None:
        residues = [[] for _ in values]
    if not isinstance(residues, list) or len(residues) != _k(m):
        raise ValueError(f"score_sums_residue must be null or a list of {_k(m)} lists, got {describe(residues)}")
    return [ExactSum.from_parts(v, r, "score_sums") for v, r in zip(values, residues)]


def _migrate_v2(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 2 had float score sums: taken as exact (no residues)."""
    return {**state, "score_sums_residue": None}


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (``scores`` only: every prediction was labelled) to version 2: predicted-class
    weights are the column sums of the arg-max cells; the per-class score sums were not kept
    (``null``: per-class ``mean_score`` stays None for such state)."""
    scores = state["scores"]
    if not isinstance(scores, Mapping) or not isinstance(scores.get("state"), Mapping):
        raise ValueError("state['scores'] must be an accumulator dict")
    s = scores["state"]
    k = len(config["classes"])
    predicted = [0.0] * k
    for cell in s["cells"]:
        if not (isinstance(cell, list) and len(cell) == 3 and type(cell[1]) is int and 0 <= cell[1] < k):
            raise ValueError(f"state['scores'] cells must be [true, argmax, weight], got {describe(cell)}")
        predicted[cell[1]] += cell[2]
    return {
        "count": sum(s["events"]),
        "prediction_weight": sum(s["weights"]),
        "predicted_weights": predicted,
        "score_sums": None,
        "scores": scores,
    }


class MulticlassMonitor(Monitor):
    """Multiclass task: ``y_true`` in ``classes``, ``scores`` a vector over ``classes``.

    Label-free part (every prediction): ``count``, ``total_weight``, the weight of each
    arg-max class (``per_class[c]["predicted_rate"]``, its share) and each class's weighted
    mean score (``per_class[c]["mean_score"]``). Label-based part: hard-label metrics of the
    arg-max prediction (``accuracy``, ``balanced_accuracy``, ``macro_precision``,
    ``macro_recall``, ``macro_f1``, ``weighted_f1``, ``matthews_corrcoef``, ``cohen_kappa``),
    ``top_k_accuracy`` (k=2), ``log_loss``, ``roc_auc`` (one-vs-rest, macro) with
    ``roc_auc_weighted``, and ``per_class`` precision/recall/F1/support/ROC AUC.

    >>> m = MulticlassMonitor(["a", "b", "c"])
    >>> s = m.update({"y_true": "a", "scores": [0.7, 0.2, 0.1]}).snapshot()
    >>> s["accuracy"], s["per_class"]["a"]["predicted_rate"], s["per_class"]["b"]["mean_score"]
    (1.0, 1.0, 0.2)
    """

    type_name = "MulticlassMonitor"
    task = "multiclass"
    parts = ("scores",)
    fields = ("y_true", "scores", "weight")
    #: version 3: exact per-class score sums (``score_sums_residue``); versions 1 and 2 load
    version = 3
    migrations = {1: _migrate_v1, 2: _migrate_v2}
    state_fields = (
        Field("count", lambda m: 0, "count", attrs="_pcount"),
        Field("prediction_weight", lambda m: 0.0, "weight", attrs="_ptotal"),
        # weight of the predictions whose arg-max (first maximum) is each class
        Field("predicted_weights", lambda m: [0.0] * _k(m), "weights", attrs="_pweights",
              decode=lambda raw, m, ld: decode_list(raw, "weight", _k(m))),
        # per class: sum of weight * score (None: unknown, state from a version-1 dict)
        Field(("score_sums", "score_sums_residue"), lambda m: [ExactSum() for _ in range(_k(m))], attrs="_psums",
              merge=_merge_sums, copy=lambda v: None if v is None else [s.copy() for s in v], encode=_encode_sums,
              decode=_decode_sums),
        part("scores", lambda m: MulticlassScores(m.classes)),
    )

    _pcount: int
    _ptotal: float
    _pweights: list
    _psums: list | None
    scores: MulticlassScores

    def __init__(self, classes: Sequence[Hashable]) -> None:
        self.classes = MulticlassScores(classes).classes
        self.reset()

    def _config(self) -> dict[str, Any]:
        return {"classes": self.scores._config()["classes"]}

    def _parser_options(self) -> dict[str, Any]:
        return {"classes": self.classes}

    @property
    def count(self) -> int:  # type: ignore[override]  # read-only: predictions seen
        return self._pcount

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # read-only: weight of the predictions
        return self._ptotal

    def update_prediction(self, event: Event) -> "MulticlassMonitor":
        s, w = event.scores, event.weight
        if s is None or len(s) != len(self.classes):
            raise ValueError(f"scores must hold {len(self.classes)} numbers aligned with the classes")
        self._pcount += 1
        self._ptotal += w
        self._pweights[max(range(len(s)), key=s.__getitem__)] += w
        sums = self._psums
        if sums is not None:
            for i, v in enumerate(s):
                sums[i].add(w * v)
        return self

    def update_predictions(self, events: Sequence[Event]) -> "MulticlassMonitor":
        S = np.asarray([e.scores for e in events], dtype=np.float64).reshape(len(events), -1)
        if S.shape[1] != len(self.classes):
            raise ValueError(f"scores must hold {len(self.classes)} numbers aligned with the classes")
        w = batch_weights(events)
        wv = np.ones(len(events)) if w is None else w
        self._pcount += len(events)
        self._ptotal += float(len(events)) if w is None else float(w.sum())
        counts = np.bincount(S.argmax(axis=1), weights=wv, minlength=len(self.classes))
        for i, v in enumerate(counts.tolist()):
            self._pweights[i] += v
        if self._psums is not None:  # exact sums of the per-event terms w * s
            add_rows(self._psums, list((wv[:, None] * S).T))
        return self

    def update_outcome(self, event: Event) -> "MulticlassMonitor":
        self.scores.update(event.y_true, event.scores, event.weight)
        return self

    def update_outcomes(self, events: Sequence[Event]) -> "MulticlassMonitor":
        y = [e.y_true for e in events]
        s = np.asarray([e.scores for e in events], dtype=np.float64)
        self.scores.update_many(y, s, batch_weights(events))
        return self

    def update_event(self, event: Event) -> "MulticlassMonitor":
        self.scores.update(event.y_true, event.scores, event.weight)  # validates the event first
        return self.update_prediction(event)

    def update_events(self, events: Sequence[Event]) -> "MulticlassMonitor":
        self.update_outcomes(events)  # validates the whole batch first
        return self.update_predictions(events)

    def snapshot(self) -> dict[str, Any]:
        sc = self.scores
        cm = sc.confusion()
        out = label_metrics(cm, self.classes)
        out["count"], out["total_weight"] = self.count, json_number(self._ptotal)
        out["top_k_accuracy"] = quiet(sc.top_k_accuracy, k=2) if len(self.classes) > 2 else None
        out["log_loss"] = quiet(sc.log_loss)
        out["roc_auc"] = quiet(sc.roc_auc, multi_class="ovr", average="macro")
        out["roc_auc_weighted"] = quiet(sc.roc_auc, multi_class="ovr", average="weighted")
        per_class = class_report(cm, self.classes)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                aucs = sc.roc_auc(multi_class="ovr", average=None)
            except ValueError:
                aucs = [None] * len(self.classes)
        for i, label in enumerate(self.classes):
            if str(label) in per_class:
                per_class[str(label)]["roc_auc"] = json_number(aucs[i])
        total = self._ptotal
        if self._pcount:
            for i, label in enumerate(self.classes):
                row = per_class.setdefault(str(label), {})
                row["predicted_rate"] = json_number(self._pweights[i] / total) if total > 0 else None
                sums = self._psums
                row["mean_score"] = json_number(sums[i].value / total) if sums is not None and total > 0 else None
        out["per_class"] = per_class
        return out
