"""``MultilabelScores``: ROC AUC and average precision of multilabel score streams, with
scikit-learn's averages for indicator targets (``micro``, ``macro``, ``weighted``,
``samples``, ``None``).

An event is a truth row (an indicator sequence of 0/1 per label, or a set of the labels
present), a score row (a sequence aligned with ``labels`` or a mapping label -> score)
and a weight.

State (all mergeable by addition):

* per label ``j``: two :class:`~streammetrics.kernels.histogram.ScoreHistogram` of the column-``j``
  scores of the events where ``j`` is absent / present (``neg``, ``pos``); ``macro``,
  ``weighted`` and ``None`` rank each label's ``pos`` against its ``neg``, ``micro``
  pools all labels' histograms (scikit-learn ravels the indicator and score matrices);
* per label the events where it is present / absent (zero weights included, for
  scikit-learn's "one class present" test) and the weight where it is present (the
  ``weighted`` average's weights);
* ``samples``: scikit-learn scores each *row* as a binary problem over the labels, so the
  per-row ROC AUC (Mann-Whitney: ``(#{pos > neg} + #{pos == neg} / 2) / (P N)``) and
  average precision (``mean over positive labels i of #{pos >= s_i} / #{labels >= s_i}``,
  scikit-learn's step sum) are computed exactly when the event arrives and kept as
  weighted running sums, with the number of rows where they are undefined.

Every sum is exact (summed weights: :mod:`~streammetrics.kernels.exact_weights`; the ``samples``
sums of ``w * row_auc`` and ``w * row_ap``: :class:`~streammetrics.kernels.exact_sum.ExactSum`),
so the state depends only on the multiset of events. The JSON writes each correctly rounded
sum, plus its residue under optional keys only when that float is not exact.

scikit-learn's edge cases, mirrored: a label with one class present gives a nan ROC AUC
with an ``UndefinedMetricWarning`` (so ``macro`` is nan; ``weighted`` zeroes labels without
positives); a row with one class present makes the ``samples`` ROC AUC nan unless its weight
is 0; a label or row without positives has average precision 0 with a ``UserWarning``;
``weighted`` returns 0 when the positive weights sum to ~0 (``<= 1e-8``). With no event, or
no weight, metrics return nan with a warning (scikit-learn raises).
"""
from __future__ import annotations

import math
import warnings
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core.accumulator import Accumulator
from streammetrics.core.labels import check_label_list
from streammetrics.core.state import Field, decode_list, describe
from streammetrics.core.validation import (
    as_weight_array,
    check_weight,
)
from streammetrics.kernels import ranking
from streammetrics.kernels.binning import Binning, ExactBinning, LogGridBinning
from streammetrics.kernels.exact_sum import BUFFER, SMALL, ExactSum, as_array, exact_units
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    WHOLE_MAX,
    all_whole,
    decode_residues,
    decode_sums,
    encode_residues,
    encode_sums,
    is_whole,
    residue_of,
    to_units,
    units_by_key,
    units_of,
    value_of,
    values_of,
    with_residue,
)
from streammetrics.kernels.histogram import (
    MAX_TOTAL_WEIGHT,
    ScoreHistogram,
    aligned,
    fit_flat,
    flatten,
    histograms_from_json,
    rebuild,
    summed,
)
from streammetrics.kernels.histogram import to_units as hists_to_units
from streammetrics.kernels.histogram_json import pack_flat
from streammetrics.metrics.rows import Columns
from streammetrics.metrics.score_columns import (
    DEFAULT_MAX_BINS,
    DEFAULT_MAX_EXACT,
    ScoreColumns,
    average_intervals,
    average_scores,
    binary_auc,
    check_average,
    rounded_exact_bounds,
    warn_no_events,
)

__all__ = ["MultilabelScores"]

_INF = math.inf
_AVERAGES = ("micro", "macro", "weighted", "samples", None)
_ROW_BLOCK = 1 << 18  # matrix cells per block in batch row statistics
_MAX_UNITS = units_of(MAX_TOTAL_WEIGHT)  # MAX_TOTAL_WEIGHT in units (kernels.exact_weights)
# float mode while the total weight stays at most this (float sums of whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT
_PAIRS = 2 * BUFFER  # pending samples terms (pairs, flattened) before a fold


def _row_stats(truth: list[bool], row: list[float]) -> tuple[int, int, int, float]:
    """``(P, N, U2, ap)`` of one row: positives, negatives, twice the Mann-Whitney count
    ``2 #{pos > neg} + #{pos == neg}`` (ROC AUC ``U2 / (2 P N)``) and the average precision
    (0 without positives)."""
    n = len(row)
    order = sorted(range(n), key=row.__getitem__, reverse=True)
    n_pos = sum(truth)
    n_neg = n - n_pos
    ratio = [0.0] * n
    u2 = tp = neg_above = 0
    i = 0
    while i < n:
        s = row[order[i]]
        j = i
        pos_g = 0
        while j < n and row[order[j]] == s:
            pos_g += truth[order[j]]
            j += 1
        neg_g = j - i - pos_g
        if pos_g:
            tp += pos_g
            r = tp / j  # precision at this threshold: positives / labels scored >= s
            for q in order[i:j]:
                ratio[q] = r
            u2 += pos_g * (2 * (n_neg - neg_above - neg_g) + neg_g)
        neg_above += neg_g
        i = j
    acc = 0.0
    for j in range(n):  # label order, as the batch path adds them
        if truth[j]:
            acc += ratio[j]
    return n_pos, n_neg, u2, (acc / n_pos if n_pos else 0.0)


def _row_stats_batch(T: np.ndarray, S: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_row_stats` for every row of a bool truth matrix ``T`` and scores ``S``
    (sort each row, find tie groups with running max/min of their start/end positions)."""
    n, L = S.shape
    P = T.sum(axis=1).astype(np.int64)
    U2 = np.zeros(n, dtype=np.int64)
    AP = np.zeros(n, dtype=np.float64)
    idx = np.arange(L)
    step = max(1, _ROW_BLOCK // L)
    for lo in range(0, n, step):
        s, t = S[lo : lo + step], T[lo : lo + step]
        m = len(s)
        order = np.argsort(-s, axis=1, kind="stable")
        ss = np.take_along_axis(s, order, axis=1)
        ts = np.take_along_axis(t, order, axis=1)
        new = np.ones((m, L), dtype=bool)
        new[:, 1:] = ss[:, 1:] != ss[:, :-1]
        last = np.ones((m, L), dtype=bool)
        last[:, :-1] = new[:, 1:]
        start = np.maximum.accumulate(np.where(new, idx, 0), axis=1)
        end = np.minimum.accumulate(np.where(last, idx, L)[:, ::-1], axis=1)[:, ::-1]
        tp_end = np.take_along_axis(np.cumsum(ts, axis=1), end, axis=1)
        ratio = np.empty((m, L))
        np.put_along_axis(ratio, order, tp_end / (end + 1), axis=1)
        negc = np.zeros((m, L + 1), dtype=np.int64)
        np.cumsum(~ts, axis=1, out=negc[:, 1:])
        neg_end = np.take_along_axis(negc, end + 1, axis=1)
        neg_start = np.take_along_axis(negc, start, axis=1)
        contrib = 2 * (negc[:, -1:] - neg_end) + (neg_end - neg_start)
        U2[lo : lo + step] = np.where(ts, contrib, 0).sum(axis=1)
        acc = np.zeros(m)
        for j in range(L):  # label order, as the per-event path adds them
            acc += np.where(t[:, j], ratio[:, j], 0.0)
        p = P[lo : lo + step]
        AP[lo : lo + step] = np.where(p > 0, acc / np.maximum(p, 1), 0.0)
    return P, L - P, U2, AP


# ----------------------------------------------------------------------------- declared state
def _n(acc: Any) -> int:
    return len(acc._cols.names)


def _total_of(loaded: Mapping[str, Any]) -> float:
    """The decoded total weight as a float (units correctly rounded)."""
    return values_of([loaded["total_weight"]])[0]


def _tol(loaded: Mapping[str, Any]) -> float:
    return 1e-9 * max(1.0, _total_of(loaded))


def _encode_total(v: float | int, acc: Any) -> tuple[float, list | None]:
    """The total weight as its float and, in units mode when not exact, its residue."""
    return (v, None) if v.__class__ is float else (value_of(v), residue_of(v))  # type: ignore[arg-type]  # units


def _decode_total(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> float | int:
    """The total weight: units when a residue is present or the value is not whole
    (``_check_state`` then puts the accumulator in units mode), else a float."""
    value, residue = raw
    total = check_weight(value, "total_weight")
    if total > MAX_TOTAL_WEIGHT:
        raise ValueError(f"exceeds {MAX_TOTAL_WEIGHT:g}")
    if residue is not None:
        return with_residue(total, residue, "total_weight_residue")
    return total if is_whole(total) else units_of(total)


def _decode_negative_events(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> list:
    neg = decode_list(raw, "count", _n(acc))
    if any(a + b != loaded["count"] for a, b in zip(loaded["positive_events"], neg)):
        raise ValueError("positive_events + negative_events must equal count for every label")
    return neg


def _decode_positive_weights(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list:
    """Per label the positive weight: units when residues are present or a value is not
    whole (``_check_state`` then puts the accumulator in units mode), else floats."""
    values, residues = raw
    w_pos = decode_list(values, "weight", _n(acc))
    if any(w > _total_of(loaded) + _tol(loaded) for w in w_pos):
        raise ValueError("exceed total_weight")
    return decode_sums(w_pos, residues, "positive_weights_residues")


class SamplesSums:
    """The exact sums of the ``samples`` terms ``w * row_auc`` (0.0 where the row's ROC AUC
    is undefined) and ``w * row_ap``, each term a float rounded once (the same float on the
    per-event and batch paths). Per event, :attr:`terms` buffers the pairs flattened
    (``auc_term, ap_term, ...``, :meth:`fold` at :data:`_PAIRS`); batches go to
    :meth:`add_arrays`; reading, merging and copying fold first.

    >>> s = SamplesSums(); s.terms += (0.1, 0.5, 0.2, 0.25, 0.3, 0.125)
    >>> s.fold().auc.value, s.ap.value, 0.1 + 0.2 + 0.3  # exact, then rounded once
    (0.6, 0.875, 0.6000000000000001)
    """

    __slots__ = ("terms", "auc", "ap")

    def __init__(self, auc: ExactSum | None = None, ap: ExactSum | None = None) -> None:
        #: pending (auc term, ap term) pairs, flattened (a list object that is never replaced)
        self.terms: list[float] = []
        self.auc = ExactSum() if auc is None else auc
        self.ap = ExactSum() if ap is None else ap

    def fold(self) -> "SamplesSums":
        terms = self.terms
        if len(terms) > 2 * SMALL:  # one array for both sums
            pairs = as_array(terms)
            terms.clear()
            self.add_arrays(pairs[0::2], pairs[1::2])
        elif terms:  # ExactSum's plain-Python path for a few terms
            self.auc.terms.extend(terms[0::2])
            self.ap.terms.extend(terms[1::2])
            terms.clear()
            self.auc.fold()
            self.ap.fold()
        return self

    def add_arrays(self, auc: np.ndarray, ap: np.ndarray) -> "SamplesSums":
        self.auc.add_array(auc)
        self.ap.add_array(ap)
        return self

    def merge(self, other: "SamplesSums") -> "SamplesSums":
        other.fold()
        self.auc.merge(other.auc)
        self.ap.merge(other.ap)
        return self

    def copy(self) -> "SamplesSums":
        self.fold()
        return SamplesSums(self.auc.copy(), self.ap.copy())

    def units(self) -> list[int]:
        """Both sums in units of ``2**-1074``."""
        self.fold()
        return [self.auc.units, self.ap.units]


def _encode_samples(v: SamplesSums, acc: Any) -> tuple[float, float, list | None]:
    units = v.units()
    return value_of(units[0]), value_of(units[1]), encode_residues(units)


def _decode_samples(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> SamplesSums:
    """Both sums (each at most the total weight) and their residues (validated)."""
    values = [check_weight(v, key) for v, key in zip(raw[:2], _SAMPLES_KEYS)]
    for v, key in zip(values, _SAMPLES_KEYS):
        if v > _total_of(loaded) + _tol(loaded):
            raise ValueError(f"{key} exceeds the total weight")
    units = decode_residues(raw[2], values, "samples_sums_residues") or [units_of(v) for v in values]
    return SamplesSums(ExactSum(units[0]), ExactSum(units[1]))


_SAMPLES_KEYS = ("samples_roc_auc_sum", "samples_average_precision_sum")


def _decode_rows(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list:
    one_class, no_pos = raw
    count = loaded["count"]
    if not (isinstance(one_class, list) and len(one_class) == 2
            and all(type(v) is int for v in one_class) and type(no_pos) is int
            and 0 <= one_class[1] <= one_class[0] <= count and 0 <= no_pos <= one_class[0]):
        raise ValueError(f"inconsistent: {describe(one_class)}, {describe(no_pos)}")
    return [one_class[0], one_class[1], no_pos]


def _fresh_histograms(acc: Any) -> tuple[Binning, tuple[list, list]]:
    binning = ExactBinning()  # every accumulator starts exact (exact while small)
    n = _n(acc)
    return binning, ([ScoreHistogram(binning) for _ in range(n)], [ScoreHistogram(binning) for _ in range(n)])


def _decode_histograms(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple[Binning, tuple[list, list]]:
    n = _n(acc)
    binning, flat = acc.decode_hists(raw, 2 * n, n * loaded["count"], exact_weights=True)
    ids, _, w = flat
    if w.dtype == object:  # units (exact_weights): compared as correctly rounded floats
        w = np.asarray(values_of(w.tolist()), dtype=np.float64)
    sizes = np.bincount(ids, minlength=2 * n).reshape(n, 2)
    totals = np.bincount(ids, weights=w, minlength=2 * n).reshape(n, 2)
    total, tol, w_pos = _total_of(loaded), _tol(loaded), values_of(loaded["positive_weights"])
    for j in range(n):
        if sizes[j, 1] > loaded["positive_events"][j] or sizes[j, 0] > loaded["negative_events"][j]:
            raise ValueError(f"histogram of label {j} has more keys than events")
        if abs(totals[j, 1] - w_pos[j]) > 1e-9 * max(1.0, w_pos[j]):
            raise ValueError(f"histogram of label {j} does not match positive_weights[{j}]")
        if abs(totals[j].sum() - total) > tol:
            raise ValueError(f"histogram of label {j} does not sum to total_weight")
    value = _fresh_histograms(acc)[1]
    rebuild(acc._hist_list_of(value), binning, flat)
    return binning, value


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (before issue 12) wrote one ``histograms_to_json`` dict per label on the
    grid of ``bins`` (or exact scores); version 2 packs them all (histogram id ``2 j`` for
    label ``j`` absent, ``2 j + 1`` present). A version-1 grid state loads on its grid,
    coarsened if it exceeds ``max_bins``."""
    acc = MultilabelScores._from_config(config)
    n = _n(acc)
    raw = state["histograms"]
    if not isinstance(raw, list) or len(raw) != n:
        raise ValueError(f"histograms must be a list of {n} label histograms")
    binning: Binning = ExactBinning() if acc.exact_config else LogGridBinning(acc.bins)
    hists = [x for h in raw for x in histograms_from_json(h, binning, ["neg", "pos"])]
    flat = flatten(hists, binning)
    if not acc.exact_config:
        flat, binning = fit_flat(flat, binning, acc.bins, acc.max_exact, acc.max_bins)
    out = dict(state)
    out["bins_per_octave"] = None if binning.exact else binning.per_octave  # type: ignore[attr-defined]  # a log grid
    out["histograms"] = pack_flat(flat, 2 * n, binning.exact)
    return out


_MULTILABEL_STATE = (
    Field("count", lambda acc: 0, "count"),
    # (the summed weights are floats while every weight is whole, else exact units
    # (kernels.exact_weights): written as floats, plus optional residues when not exact)
    Field(("total_weight", "total_weight_residue"), lambda acc: 0.0, attrs="_total",
          merge=lambda a, b, acc: a + b, copy=lambda v: v, encode=_encode_total, decode=_decode_total,
          optional=("total_weight_residue",)),
    # events with the label present / absent (zero weights included)
    Field("positive_events", lambda acc: [0] * _n(acc), "counts", attrs="_n_pos",
          decode=lambda raw, acc, ld: decode_list(raw, "count", _n(acc))),
    Field("negative_events", lambda acc: [0] * _n(acc), "counts", attrs="_n_neg", decode=_decode_negative_events),
    # weight of events with the label present
    Field(("positive_weights", "positive_weights_residues"), lambda acc: [0.0] * _n(acc), attrs="_w_pos",
          merge=lambda a, b, acc: [x + y for x, y in zip(a, b)], copy=list, encode=lambda v, acc: encode_sums(v),
          decode=_decode_positive_weights, optional=("positive_weights_residues",)),
    # exact sums of w * row ROC AUC over rows where it is defined, and of w * row average
    # precision (each written as its correctly rounded float, plus optional residues)
    Field((*_SAMPLES_KEYS, "samples_sums_residues"), lambda acc: SamplesSums(), attrs="_samples",
          merge=lambda a, b, acc: a.merge(b), copy=lambda v: v.copy(), encode=_encode_samples,
          decode=_decode_samples, optional=("samples_sums_residues",)),
    # rows with one class (ROC AUC undefined), those of them with weight > 0, and rows
    # without a positive label (average precision 0 with a warning)
    Field(("one_class_rows", "no_positive_rows"), lambda acc: [0, 0, 0], attrs="_rows",
          merge=lambda a, b, acc: [x + y for x, y in zip(a, b)], copy=list,
          encode=lambda v, acc: (v[:2], v[2]), decode=_decode_rows),
    # the binning in force (null: exact scores) and per label the histograms of the events
    # where it is absent / present, packed (histogram id 2 j / 2 j + 1): merged together
    # (the binning changes with the entries of all of them; see ScoreColumns)
    Field(("bins_per_octave", "histograms"), _fresh_histograms, attrs=("_binning", "_pair"),
          merge=ScoreColumns.merge_hists,
          copy=lambda v: (v[0], ([h.copy() for h in v[1][0]], [h.copy() for h in v[1][1]])),
          encode=lambda v, acc: acc.encode_hists(v), decode=_decode_histograms),
)


class MultilabelScores(ScoreColumns):
    """ROC AUC (with guaranteed bounds) and average precision of multilabel score rows.

    ``labels`` is the number of labels ``n`` (labels are then ``0 .. n-1``, the columns of
    scikit-learn's indicator matrices) or a sequence of distinct label names (int, str or
    bool, one kind) giving the column order. The ``2 L`` score histograms share one budget
    as in :class:`~streammetrics.MulticlassScores` (exact while they hold at most
    ``max_exact`` entries in all, then the log grid with ``bins`` bins per octave coarsened
    together while they hold more than ``max_bins``; at most ``max(max_bins, 16 L)``
    entries); with ``exact=True``, or while exact, every average equals
    ``sklearn.metrics.roc_auc_score`` / ``average_precision_score`` on the indicator
    matrix (``samples`` is exact in either mode).

    >>> m = MultilabelScores(["x", "y"]).update_many([[1, 0], [0, 1], [1, 1]], [[0.9, 0.2], [0.3, 0.7], [0.6, 0.4]])
    >>> m.roc_auc(), m.average_precision(average="micro")
    (1.0, 1.0)
    """

    type_name = "MultilabelScores"
    state_fields = _MULTILABEL_STATE

    # the declared state (see _MULTILABEL_STATE)
    _count: int
    _total: Any  # a float (float mode) or units (kernels.exact_weights)
    _n_pos: list[int]
    _n_neg: list[int]
    _w_pos: list[Any]  # floats or units, as _total
    _samples: SamplesSums
    _sterms: list[float]  # _samples.terms (the per-event buffer)
    _rows: list[int]
    _pair: tuple[list[ScoreHistogram], list[ScoreHistogram]]
    columns_key = "labels"
    #: version 2 packs the histograms and bounds them (version 1 dicts still load)
    version = 2
    migrations = {1: _migrate_v1}

    def __init__(
        self, labels: int | Sequence[Hashable], bins: int | None = 64, exact: bool = False,
        max_bins: int | None = DEFAULT_MAX_BINS, max_exact: int | None = DEFAULT_MAX_EXACT,
    ) -> None:
        names = check_label_list(labels, "labels", allow_count=True)
        self._cols = Columns(names, "label", "labels")
        self.setup_budget(bins, exact, max_bins, max_exact)
        self.reset()

    # ------------------------------------------------------------------ state
    def _hist_list_of(self, pair: tuple) -> list[ScoreHistogram]:
        return [h for both in zip(*pair) for h in both]

    def _hist_list(self) -> list[ScoreHistogram]:
        return self._hist_list_of(self._pair)

    def _refresh(self) -> None:
        # units mode (kernels.exact_weights): every summed weight is an int of units then
        self._units = self._total.__class__ is int
        self._sterms = self._samples.terms
        self._neg, self._pos = self._pair
        self._hw = [(a.weights, b.weights) for a, b in zip(self._neg, self._pos)]
        self._key = self.binning.key
        self._entries = sum(len(a) + len(b) for a, b in self._hw)
        self._over = self.entry_limit()

    def _check_merge(self, other: Accumulator) -> None:
        assert isinstance(other, MultilabelScores)
        if to_units(self._total) + to_units(other._total) > _MAX_UNITS:
            raise ValueError(f"merged weight would exceed {MAX_TOTAL_WEIGHT:g}")

    # ------------------------------------------------------------------ exact weight sums
    def _to_units(self) -> None:
        """Switch to units mode: the total, the positive weights and every histogram
        converted exactly to units of ``2**-1074``. The state (its JSON) does not change;
        later weights are summed exactly."""
        self._total = to_units(self._total)
        self._w_pos = [to_units(x) for x in self._w_pos]
        hists_to_units(self._hist_list())
        self._refresh()

    def _whole_total(self) -> float:
        """The total weight in float mode (bounds every summed weight: see :meth:`ScoreColumns.merge`)."""
        return float(self._total)

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """Decode rule of exact weight sums: units mode for every container as soon as one
        of them is (a residue, or a summed weight that is not whole), else float mode."""
        hists = self._hist_list_of(loaded["bins_per_octave"][1])
        firsts = [loaded["total_weight"], *loaded["positive_weights"][:1],
                  *(next(iter(h.weights.values())) for h in hists if h.weights)]
        if not any(x.__class__ is int for x in firsts):
            return
        loaded["total_weight"] = to_units(loaded["total_weight"])
        loaded["positive_weights"] = [to_units(x) for x in loaded["positive_weights"]]
        hists_to_units(hists)

    @property
    def labels(self) -> list:
        """Label names in column order."""
        return list(self._cols.names)

    @property
    def count(self) -> int:  # type: ignore[override]  # a read-only property over the declared state
        """Number of events seen (zero-weight events included)."""
        return self._count

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the declared state
        """Summed weight of the events seen (exact, correctly rounded)."""
        return value_of(self._total) if self._units else self._total

    # ------------------------------------------------------------------ updates
    def update(self, y_true: Any, scores: Any, weight: float = 1.0) -> "MultilabelScores":
        """Add one event: a truth row (0/1 per label, or a set of labels), a score row
        (sequence aligned with ``labels`` or mapping label -> score) and a weight."""
        truth = self._cols.indicator_row(y_true, "y_true")
        row = self._cols.row(scores, "scores")
        if weight.__class__ is not float or not 0.0 <= weight < _INF:
            weight = check_weight(weight)
        if (not self._units and (weight == 1.0 or (weight.is_integer() and weight <= WHOLE_MAX))
                and self._total <= _FLOAT_EXACT):
            add: Any = weight  # float mode: every weight so far whole, sums exact as floats
            total = self._total + weight
            if total > MAX_TOTAL_WEIGHT:
                raise ValueError(f"weight {weight!r} would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
        else:
            add = UNIT if weight == 1.0 else units_of(weight)  # exact sums (kernels.exact_weights)
            total = to_units(self._total) + add
            if total > _MAX_UNITS:
                raise ValueError(f"weight {weight!r} would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
            if not self._units:
                self._to_units()  # the same state, in units (nothing below can fail)
        n_pos, n_neg, u2, ap = _row_stats(truth, row)
        # ---- nothing below can fail
        key = self._key
        new = 0
        w_pos = self._w_pos
        for j, (present, s, hists) in enumerate(zip(truth, row, self._hw)):
            if present:
                self._n_pos[j] += 1
                w_pos[j] += add
            else:
                self._n_neg[j] += 1
            if weight:
                d = hists[present]
                k = key(s)
                old = d.get(k)
                if old is None:
                    d[k] = add
                    new += 1
                else:
                    d[k] = old + add
        if new:
            self._entries += new
            if self._entries > self._over:
                self.fit_budget()
        if n_pos and n_neg:
            auc_term = weight * (u2 / (2 * n_pos * n_neg))
        else:
            auc_term = 0.0
            self._rows[0] += 1
            if weight:
                self._rows[1] += 1
            if not n_pos:
                self._rows[2] += 1
        terms = self._sterms  # summed exactly (SamplesSums)
        terms.append(auc_term)
        terms.append(weight * ap)
        if len(terms) >= _PAIRS:
            self._samples.fold()
        self._count += 1
        self._total = total
        return self

    def update_many(self, y_true: Any, score_matrix: Any, sample_weight: Any = None) -> "MultilabelScores":
        """Add a batch: an ``(n, L)`` indicator matrix (or a sequence of label sets), an
        ``(n, L)`` score matrix and optional weights; validated in full before any change."""
        T = self._cols.indicator_matrix(y_true, "y_true")
        S = self._cols.matrix(score_matrix, "score_matrix")
        if len(T) != len(S):
            raise ValueError(f"inconsistent batch lengths: y_true has {len(T)}, score_matrix has {len(S)}")
        n = len(T)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        L = S.shape[1]
        ww = np.ones(n) if w is None else w
        # units mode (exact sums, kernels.exact_weights) once a weight is not whole
        units = (self._units or (w is not None and not all_whole(w))
                 or self._total + (float(n) if w is None else float(w.sum())) > _FLOAT_EXACT)
        w_pos: list[Any]
        if units:
            total: Any = to_units(self._total) + exact_units(ww)
            if total > _MAX_UNITS:
                raise ValueError(f"sample_weight would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
            rows_t, cols_t = np.nonzero(T)
            got = units_by_key(cols_t, ww[rows_t])
            w_pos = [got.get(j, 0) for j in range(L)]
        else:
            total = self._total + (float(n) if w is None else float(w.sum()))
            if total > MAX_TOTAL_WEIGHT:
                raise ValueError(f"sample_weight would make the total weight exceed {MAX_TOTAL_WEIGHT:g}")
            w_pos = (ww @ T.astype(np.float64)).tolist()
        P, N, U2, AP = _row_stats_batch(T, S)
        defined = (P > 0) & (N > 0)
        auc_terms = np.zeros(n)  # the per-event terms: w * (U2 / (2 P N)), 0.0 where undefined
        auc_terms[defined] = ww[defined] * (U2[defined] / (2 * P[defined] * N[defined]))
        rows = [int(np.count_nonzero(~defined)), int(np.count_nonzero(~defined & (ww > 0))),
                int(np.count_nonzero(P == 0))]
        n_pos = T.sum(axis=0).tolist()
        flat, binning = self.batch_flat(S, lambda j: T[:, j].astype(np.int64), 2, 1,
                                         [2 * j for j in range(L)], w, units=units)
        # ---- commit: nothing below can fail
        if units and not self._units:
            self._to_units()  # the same state, in units
        self.add_batch(flat, binning)
        for j in range(L):
            self._n_pos[j] += n_pos[j]
            self._n_neg[j] += n - n_pos[j]
            self._w_pos[j] += w_pos[j]
        self._samples.add_arrays(auc_terms, ww * AP)
        self._rows = [a + b for a, b in zip(self._rows, rows)]
        self._count += n
        self._total = total
        return self

    # ------------------------------------------------------------------ metrics
    def _pooled(self) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, [neg, pos])`` of all labels' histograms pooled (the micro average)."""
        return aligned(summed(self._neg, self.binning), summed(self._pos, self.binning))

    def _roc(self, average: Any, bounds: bool) -> tuple[Any, Any, Any]:
        check_average(average, _AVERAGES, "multilabel roc_auc")
        n = len(self._cols.names)
        if not self._count:
            nan = warn_no_events("roc_auc")
            if average is None:
                return np.full(n, nan), np.full(n, nan), np.full(n, nan)
            return nan, nan, nan
        if average == "samples":
            if self._rows[0]:
                ranking.warn_one_class()
            if self._rows[1]:
                return math.nan, math.nan, math.nan
            total = self.total_weight
            if not total > 0:
                nan = warn_no_events("roc_auc")
                return nan, nan, nan
            value = self._samples.fold().auc.value / total
            return value, value, value
        w_pos = np.asarray(values_of(self._w_pos), dtype=np.float64)
        if average == "weighted" and abs(float(w_pos.sum())) <= 1e-8:
            return 0.0, 0.0, 0.0  # scikit-learn: weights summing to ~0 give 0, unchecked
        if average == "micro":
            if not (sum(self._n_pos) and sum(self._n_neg)):
                nan = ranking.warn_one_class()
                return nan, nan, nan
            keys, w = self._pooled()
            return binary_auc(self.binning, keys, w[0], w[1], bounds)
        parts = np.full((3, n), np.nan)
        for j, (neg, pos) in enumerate(zip(self._neg, self._pos)):
            if not (self._n_pos[j] and self._n_neg[j]):
                ranking.warn_one_class()
                continue
            keys, w = aligned(neg, pos)
            parts[:, j] = binary_auc(self.binning, keys, w[0], w[1], bounds)
        weights = w_pos if average == "weighted" else None
        low, high = average_intervals(parts[1], parts[2], average, weights)
        return average_scores(parts[0], average, weights), low, high

    def roc_auc(self, average: str | None = "macro") -> Any:
        """``sklearn.metrics.roc_auc_score(Y, scores, average=...)`` on the indicator matrix:
        per label (``None``: an array; ``"macro"``: their mean; ``"weighted"``: weighted by
        positive weight), ``"micro"`` (all labels pooled) or ``"samples"`` (the weighted mean
        of the per-row AUCs over the labels). Tied scores, and with bins scores in one bin,
        count half a pair."""
        return self._roc(average, False)[0]

    def roc_auc_bounds(self, average: str | None = "macro") -> tuple[Any, Any]:
        """``(low, high)`` guaranteed to contain the exact :meth:`roc_auc`: per-label bounds
        as in :meth:`BinaryScores.roc_auc_bounds`, averaged with the same weights.
        ``"samples"`` is exact in every mode, as is everything when ``exact``."""
        value, low, high = self._roc(average, not self.exact)
        if self.exact or average == "samples":
            return rounded_exact_bounds(value, self._entries + 2 * len(self._cols.names))
        return low, high

    def average_precision(self, average: str | None = "macro") -> Any:
        """``sklearn.metrics.average_precision_score(Y, scores, average=...)`` on the
        indicator matrix: per label the step sum ``sum((R[n] - R[n-1]) * P[n])``, averaged
        like :meth:`roc_auc` (``"samples"``: the weighted mean of the per-row values)."""
        check_average(average, _AVERAGES, "multilabel average_precision")
        n = len(self._cols.names)
        if not self._count:
            nan = warn_no_events("average_precision")
            return np.full(n, nan) if average is None else nan
        if average == "samples":
            if self._rows[2]:
                warnings.warn(
                    "No positive class found in y_true, recall is set to one for all thresholds.",
                    UserWarning,
                    stacklevel=2,
                )
            total = self.total_weight
            if not total > 0:
                return warn_no_events("average_precision")
            return self._samples.fold().ap.value / total
        w_pos = np.asarray(values_of(self._w_pos), dtype=np.float64)
        if average == "weighted" and abs(float(w_pos.sum())) <= 1e-8:
            return 0.0
        if average == "micro":
            _, w = self._pooled()
            return ranking.average_precision(w[0], w[1])
        values = np.empty(n)
        for j, (neg, pos) in enumerate(zip(self._neg, self._pos)):
            _, w = aligned(neg, pos)
            values[j] = ranking.average_precision(w[0], w[1])
        return average_scores(values, average, w_pos if average == "weighted" else None)
