"""``MulticlassScores``: ranking and probabilistic metrics of a stream of score vectors.

An event is a true class ``t`` (one of ``classes``), a row of ``K`` scores aligned with
``classes`` (a sequence, or a mapping class -> score) and a weight.

State (all mergeable by addition):

* ``H[t][c]``: a :class:`~streammetrics.kernels.histogram.ScoreHistogram` of the column-``c``
  scores of the events of true class ``t`` (``K * K`` histograms over one binning, within
  one budget: exact scores while they hold at most ``max_exact`` entries in all, then the
  log grid coarsened for all of them while they hold more than ``max_bins``; see
  :class:`~streammetrics.metrics.score_columns.ScoreColumns`). The one-vs-one pair
  ``(a, b)`` (Hand & Till 2001) ranks ``H[a][a]`` against ``H[b][a]`` and ``H[b][b]``
  against ``H[a][b]``;
* the one-vs-rest set, ``N[c] = sum(H[t][c] for t != c)`` and ``P[c] = H[c][c]``, kept as
  ``2 K`` histograms of their own within a budget of their own (so that one-vs-rest keeps
  a fine grid when the ``K * K`` pair histograms must coarsen): one-vs-rest ranks ``P[c]``
  against ``N[c]``, the micro average pools every column's, average precision is
  one-vs-rest too;
* per class: events seen (zero weights included: scikit-learn's "class present" test
  counts them) and summed weight;
* ``ranks[r]``: the weight of events whose true class has rank ``r`` in its row, where
  ``rank = #{c: s_c > s_t} + #{c > t: s_c == s_t}`` (scikit-learn's ``top_k_accuracy_score``
  sorts with a stable mergesort and reverses it, so among tied scores the higher class
  index comes first); top-k accuracy is ``sum(ranks[:k]) / total weight`` for any ``k``;
* the confusion cells ``(t, argmax)`` of the arg-max predictions (numpy's first max);
* ``sum(w * -log(clip(s_t, eps, 1 - eps)))`` (scikit-learn's ``log_loss``, float64 eps),
  the [min, max] of any score outside [0, 1], and the number of rows that fail each of
  scikit-learn's "rows sum to 1" tests.

Every summed weight above (class weights, ranks, binary top-1 hits, cells, both histogram sets)
is exact (:mod:`~streammetrics.kernels.exact_weights`): floats while every weight seen is a
whole number and the total weight at most ``2**52`` (float sums exact), else, for the whole
accumulator ("units mode", from the first weight such as 0.1, a total past ``2**52``, or a
merge with a state in units mode), Python ints of units of ``2**-1074``, so that the state
depends only on the multiset of events, however a stream is split, batched or merged. The
state writes each sum as its correctly rounded float where it always did and, only when some
float is not exact, its residue: under optional
``weights_residues`` / ``ranks_residues`` / ``binary_top1_residues`` keys
(``[[index, residue], ...]``) and, for the packed cells and histogram sets, under the packed
form's optional ``"residues"`` (indexed by entry in packed order; see
:func:`~streammetrics.kernels.histogram_json.pack_flat`). States of whole weights keep their
bytes. Metrics read the correctly rounded sums.

``to_dict`` (version 2) writes the histograms and the cells in the packed form of
:func:`~streammetrics.kernels.histogram_json.pack_flat` (base64 of varints / float64,
zlib-compressed when large; pair histogram id ``t * K + c``, one-vs-rest id ``2 c`` for
``N[c]`` and ``2 c + 1`` for ``P[c]``, cell key ``t * K + argmax``) and the binning in force
under ``bins_per_octave`` / ``ovr_bins_per_octave`` (null while exact; a fraction
``1 / 2**j`` once a bin spans ``2**j`` octaves). While the pair histograms are exact the
one-vs-rest set is their sums and is written as null. Version-1 dicts (lists) still load, on their grid, coarsened
to the budget if they exceed it.

Decisions where a stream accumulator cannot or should not copy scikit-learn (1.9):

* Rows that do not sum to 1: ``roc_auc_score`` raises (``np.allclose(1, row sums)``);
  here :meth:`MulticlassScores.roc_auc` computes from the scores as given (a ranking
  of each column is well defined for margins too) and warns (``UserWarning``) with the
  number of such rows. ``log_loss`` warns and does *not* renormalise, as scikit-learn.
* Scores outside [0, 1]: ``log_loss`` raises ``ValueError`` at read time (scikit-learn
  raises); every other metric is unaffected.
* ``multi_class="ovo"`` with weights: scikit-learn refuses ``sample_weight``; here each
  pairwise AUC is weighted and pairs are weighted by their weight share ("prevalence").
  Classes with no weight are left out of the pairs (with unit weights: the classes
  present, as scikit-learn). Fewer than two such classes: nan with a warning.
* Two classes: scikit-learn's ``roc_auc_score`` and ``top_k_accuracy_score`` refuse a
  two-column score matrix. ROC AUC and average precision here are the one-vs-rest
  (and one-vs-one) values of the one-hot targets, ``roc_auc_score(np.eye(2)[y], scores)``;
  ``top_k_accuracy`` follows scikit-learn's binary path on the score of ``classes[1]``
  (``k=1``: ``s > 0.5`` predicts ``classes[1]``, or ``s > 0`` once a score of that column
  outside [0, 1] has been seen; ``k >= 2``: every event is a hit).
* scikit-learn requires sorted ``labels``; here columns follow ``classes`` in the order
  given. With sorted classes every value is scikit-learn's with ``labels=classes``.
* No event, or no weight: scikit-learn raises; metrics here return nan with an
  :class:`~streammetrics.core.exceptions.UndefinedMetricWarning`.
"""
from __future__ import annotations

import math
import operator
import warnings
from functools import reduce
from itertools import combinations
from typing import Any, Hashable, Mapping, Sequence

import numpy as np

from streammetrics.core import state as _state_mod
from streammetrics.core.accumulator import Accumulator
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.core.labels import check_label_list
from streammetrics.core.state import KINDS, Field, decode_list, describe
from streammetrics.core.validation import (
    as_label_array,
    as_weight_array,
    check_number,
    check_same_length,
    check_weight,
    to_builtin_label,
)
from streammetrics.kernels import ranking
from streammetrics.kernels.binning import Binning, ExactBinning, LogGridBinning
from streammetrics.kernels.exact_sum import LogLossSum, exact_units
from streammetrics.kernels.exact_weights import (
    FLOAT_EXACT,
    UNIT,
    WHOLE_MAX,
    all_whole,
    decode_sums,
    encode_sums,
    to_units,
    units_by_key,
    units_of,
    value_of,
    values_of,
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
from streammetrics.kernels.histogram_json import SMALL_KEYS, pack_dicts, pack_flat, unpack_flat
from streammetrics.metrics.confusion import ConfusionMatrix, array_kind
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

__all__ = ["MulticlassScores"]

_INF = math.inf
_EPS = float(np.finfo(np.float64).eps)  # log_loss clipping (float64 machine epsilon)
_ONE_MINUS_EPS = 1.0 - _EPS
#: log_loss warns unless |row sum - 1| <= 1e-8 + sqrt(eps) (xpx.isclose, rtol=sqrt(eps))
_LOG_LOSS_SUM_TOL = 1e-8 + math.sqrt(_EPS)
_ROW_BLOCK = 1 << 16  # rows per block in batch rank computations
_add = operator.add
_MAX_UNITS = units_of(MAX_TOTAL_WEIGHT)  # MAX_TOTAL_WEIGHT in units (kernels.exact_weights)
_add_lists = KINDS["weights"].merge  # element-wise sum of fixed-length lists (core.state)
# float mode while the total weight (a bound on every summed weight) stays at most this (float sums of
# whole weights exact: < 2**53)
_FLOAT_EXACT = FLOAT_EXACT


# ----------------------------------------------------------------------------- declared state
def _k(acc: Any) -> int:
    return len(acc._cols.names)


def _fresh_h(acc: Any) -> tuple[Binning, list]:
    binning = ExactBinning()  # every accumulator starts exact (exact while small)
    k = _k(acc)
    return binning, [[ScoreHistogram(binning) for _ in range(k)] for _ in range(k)]


def _decode_h(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple[Binning, list]:
    """The pair histograms (in units when the packed set has residues or a weight that is
    not whole: ``_check_state`` then puts the accumulator in units mode)."""
    k = _k(acc)
    events, weights = loaded["events"], values_of(loaded["weights"])
    binning, flat = acc.decode_hists(raw, k * k, k * sum(events), exact_weights=True)
    ids, _, w = flat[0], flat[1], _floats(flat[2])
    sizes = np.bincount(ids, minlength=k * k).reshape(k, k)
    totals = np.bincount(ids, weights=w, minlength=k * k).reshape(k, k)
    for t in range(k):
        if sizes[t].max() > events[t]:
            raise ValueError(f"a histogram of class {t} has more keys than the class has events")
        if np.abs(totals[t] - weights[t]).max() > 1e-9 * max(1.0, weights[t]):
            raise ValueError(f"a histogram of class {t} does not sum to weights[{t}]")
    h = [[ScoreHistogram(binning) for _ in range(k)] for _ in range(k)]
    rebuild([x for row in h for x in row], binning, flat)
    return binning, h


def _ovr_list(value: tuple) -> list[ScoreHistogram]:
    """The one-vs-rest set in id order: ``[N[0], P[0], N[1], P[1], ...]`` (id ``2 c + is_c``)."""
    return [h for pair in zip(*value) for h in pair]


def _fresh_ovr(acc: Any) -> tuple[Binning, tuple[list, list]]:
    binning = ExactBinning()
    k = _k(acc)
    return binning, ([ScoreHistogram(binning) for _ in range(k)], [ScoreHistogram(binning) for _ in range(k)])


def _derive_ovr(binning: Binning, h: list, k: int) -> tuple[list, list]:
    """``N[c] = sum(H[t][c] for t != c)`` and ``P[c] = H[c][c]`` (t ascending)."""
    neg = [ScoreHistogram(binning) for _ in range(k)]
    pos = [ScoreHistogram(binning) for _ in range(k)]
    for c in range(k):
        pos[c].weights.update(h[c][c].weights)
        for t in range(k):
            if t != c and h[t][c].weights:
                neg[c].merge_weights(h[t][c].weights)
    return neg, pos


def _pairs(h: list) -> list[ScoreHistogram]:
    return [x for row in h for x in row]


def _ovr_of(binning: Binning, h: list, obinning: Binning, ovr: tuple, k: int) -> tuple[Binning, tuple]:
    """The one-vs-rest set of a state: derived from the pair histograms while they are
    exact (it is not kept then), else the one kept."""
    if binning.exact:
        return binning, _derive_ovr(binning, h, k)
    return obinning, ovr


def _fresh_all(acc: Any) -> tuple:
    return (*_fresh_h(acc), *_fresh_ovr(acc))


def _copy_all(v: tuple) -> tuple:
    return v[0], [[h.copy() for h in row] for row in v[1]], v[2], ([h.copy() for h in v[3][0]],
                                                                   [h.copy() for h in v[3][1]])


def _merge_all(mine: tuple, theirs: tuple, acc: Any) -> tuple:
    """Both sets merged as :meth:`ScoreColumns.merge_sets` (the one-vs-rest sets first,
    derived from the pairs of a side whose pairs are exact); the one-vs-rest set is dropped
    again if the merged pairs are still exact."""
    k = _k(acc)
    m_ob, m_ovr = _ovr_of(mine[0], mine[1], mine[2], mine[3], k)
    t_ob, t_ovr = _ovr_of(theirs[0], theirs[1], theirs[2], theirs[3], k)
    obinning = acc.merge_sets(m_ob, _ovr_list(m_ovr), t_ob, _ovr_list(t_ovr))
    binning = acc.merge_sets(mine[0], _pairs(mine[1]), theirs[0], _pairs(theirs[1]))
    if binning.exact:
        return (binning, mine[1], *_fresh_ovr(acc))
    return binning, mine[1], obinning, m_ovr


def _encode_all(v: tuple, acc: Any) -> tuple:
    """Both sets packed (units mode: the rounded floats, and their residues under the
    packed set's ``"residues"``; see :func:`~streammetrics.kernels.histogram_json.pack_flat`)."""
    binning, h, obinning, ovr = v
    ovr_json = (None, None) if binning.exact else acc.encode_set(obinning, _ovr_list(ovr))
    flat = acc._ovr_memo.get("flat") if h is acc._h else None
    if flat is not None and len(flat[0]) > SMALL_KEYS:  # (pack_dicts of these histograms: pack_flat of them)
        return None, pack_flat(flat, len(h) ** 2, True), *ovr_json
    return (*acc.encode_set(binning, _pairs(h)), *ovr_json)


def _decode_all(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple:
    binning, h = _decode_h(raw[:2], acc, loaded)
    if binning.exact:
        if raw[2] is not None or raw[3] is not None:
            raise ValueError("ovr_histograms must be null while the pair histograms are exact (their sums)")
        return (binning, h, *_fresh_ovr(acc))
    if raw[3] is None:
        raise ValueError("ovr_histograms must be a packed set once the pair histograms are on a grid")
    return (binning, h, *_decode_ovr(raw[2:], acc, loaded))


def _floats(w: np.ndarray) -> np.ndarray:
    """Decoded packed weights as floats (units, an object array, correctly rounded)."""
    return np.asarray(values_of(w.tolist()), dtype=np.float64) if w.dtype == object else w


def _decode_ovr(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> tuple[Binning, tuple[list, list]]:
    """The one-vs-rest set (units as in ``_decode_h``)."""
    k = _k(acc)
    events, weights = loaded["events"], values_of(loaded["weights"])
    count, total = sum(events), math.fsum(weights)
    binning, flat = acc.decode_hists(raw, 2 * k, k * count, exact_weights=True)
    ids, _, w = flat[0], flat[1], _floats(flat[2])
    sizes = np.bincount(ids, minlength=2 * k).reshape(k, 2)
    totals = np.bincount(ids, weights=w, minlength=2 * k).reshape(k, 2)
    tol = 1e-9 * max(1.0, total)
    for c in range(k):
        if sizes[c, 1] > events[c] or sizes[c, 0] > count - events[c]:
            raise ValueError(f"a one-vs-rest histogram of class {c} has more keys than events")
        if abs(totals[c, 1] - weights[c]) > tol or abs(totals[c, 0] - (total - weights[c])) > tol:
            raise ValueError(f"the one-vs-rest histograms of class {c} do not match the class weights")
    value = _fresh_ovr(acc)[1]
    rebuild(_ovr_list(value), binning, flat)
    return binning, value


def _migrate_v1(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 1 (before issue 12) wrote the histograms as ``K`` column dicts of
    ``histograms_to_json`` on the grid of ``bins`` (or exact scores) and the cells as
    ``[true, argmax, weight]`` lists. Version 2 packs both; a version-1 grid state loads on
    its grid, coarsened if it exceeds ``max_bins`` (then its AUCs are those of the coarser grid)."""
    acc = MulticlassScores._from_config(config)
    k = _k(acc)
    out = dict(state)
    columns = state["histograms"]
    if not isinstance(columns, list) or len(columns) != k:
        raise ValueError(f"histograms must be a list of {k} column histograms")
    binning: Binning = ExactBinning() if acc.exact_config else LogGridBinning(acc.bins)
    names = [f"t{t}" for t in range(k)]
    hists = [histograms_from_json(col, binning, names) for col in columns]
    flat_list = [hists[c][t] for t in range(k) for c in range(k)]
    flat = flatten(flat_list, binning)
    if not acc.exact_config:
        flat, binning = fit_flat(flat, binning, acc.bins, acc.max_exact, acc.max_bins)
    out["bins_per_octave"] = None if binning.exact else binning.per_octave  # type: ignore[attr-defined]  # a log grid
    out["histograms"] = pack_flat(flat, k * k, binning.exact)  # (with residues if in units)
    out["ovr_bins_per_octave"] = out["ovr_histograms"] = None
    if not binning.exact:  # the one-vs-rest set: the sums of the pair histograms, fitted on its own
        ovr_binning: Binning = ExactBinning() if acc.exact_config else LogGridBinning(acc.bins)
        grid_hists = [ScoreHistogram(ovr_binning) for _ in range(k * k)]
        rebuild(grid_hists, ovr_binning, flatten(flat_list, ovr_binning))
        neg, pos = _derive_ovr(ovr_binning, [grid_hists[t * k : (t + 1) * k] for t in range(k)], k)
        ovr_flat = flatten(_ovr_list((neg, pos)), ovr_binning)
        if not acc.exact_config:
            ovr_flat, ovr_binning = fit_flat(ovr_flat, ovr_binning, acc.bins, acc.max_exact, acc.max_bins)
        out["ovr_bins_per_octave"] = None if ovr_binning.exact else ovr_binning.per_octave  # type: ignore[attr-defined]  # a log grid
        out["ovr_histograms"] = pack_flat(ovr_flat, 2 * k, ovr_binning.exact)
    cells = state["cells"]
    if not isinstance(cells, list) or not all(
            isinstance(c, list) and len(c) == 3 and type(c[0]) is int and type(c[1]) is int
            and 0 <= c[0] < k and 0 <= c[1] < k and type(c[2]) in (int, float) for c in cells):
        raise ValueError("cells must be a list of [true index, argmax index, weight]")
    cell_keys = np.array([c[0] * k + c[1] for c in cells], dtype=np.int64)
    order = np.argsort(cell_keys, kind="stable")
    cell_w = np.array([float(c[2]) for c in cells], dtype=np.float64)
    out["cells"] = pack_flat((np.zeros(len(cells), np.int64), cell_keys[order], cell_w[order]), 1, False)
    return out


def _decode_sums(raw: tuple, n: int, name: str) -> list:
    """``n`` summed weights from (floats, residues): units when residues are present or a
    value is not whole (``_check_state`` then puts the accumulator in units mode), else floats."""
    values, residues = raw
    return decode_sums(decode_list(values, "weight", n), residues, f"{name}_residues")


def _decode_weights(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list:
    weights = _decode_sums(raw, _k(acc), "weights")
    if math.fsum(values_of(weights)) > MAX_TOTAL_WEIGHT:
        raise ValueError(f"weights sum to more than {MAX_TOTAL_WEIGHT:g}")
    return weights


def _tolerance(loaded: Mapping[str, Any]) -> tuple[float, float]:
    total = math.fsum(values_of(loaded["weights"]))
    return total, 1e-9 * max(1.0, total)


def _decode_ranks(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list:
    ranks = _decode_sums(raw, _k(acc), "ranks")
    total, tol = _tolerance(loaded)
    if abs(math.fsum(values_of(ranks)) - total) > tol:
        raise ValueError("ranks do not sum to the total weight")
    return ranks


def _merge_top1(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if mine is None or theirs is None:
        return mine
    return [mine[0] + theirs[0], mine[1] + theirs[1], mine[2] or theirs[2]]


def _encode_top1(v: list | None, acc: Any) -> tuple[list | None, list | None]:
    if v is None:
        return None, None
    values, residues = encode_sums(v[:2])
    return [*values, v[2]], residues


def _decode_top1(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> list | None:
    top1, residues = raw
    if _k(acc) != 2:
        if top1 is not None or residues is not None:
            raise ValueError("must be null for more than two classes")
        return None
    if not (isinstance(top1, list) and len(top1) == 3 and type(top1[2]) is bool):
        raise ValueError(f"must be [hits at 0.5, hits at 0, bool], got {describe(top1)}")
    out = [*_decode_sums((top1[:2], residues), 2, "binary_top1"), top1[2]]
    total, tol = _tolerance(loaded)
    if max(values_of(out[:2])) > total + tol:
        raise ValueError("hits exceed the total weight")
    return out


def _encode_log_loss(v: LogLossSum, acc: Any) -> tuple:
    return v.value, (v.residue() or None)


def _decode_log_loss(raw: tuple, acc: Any, loaded: Mapping[str, Any]) -> LogLossSum:
    value, residue = raw
    if type(value) not in (int, float) or not value >= 0:
        raise ValueError(f"log_loss_sum must be a non-negative number, got {describe(value)}")
    return LogLossSum.from_parts(float(value), residue, "log_loss_sum")  # type: ignore[return-value]  # cls


def _migrate_v2(state: Mapping[str, Any], config: Mapping[str, Any]) -> dict[str, Any]:
    """Version 2 had a float log-loss sum: taken as exact (no residue)."""
    return {**state, "log_loss_residue": None}


def _merge_outside(mine: list | None, theirs: list | None, acc: Any) -> list | None:
    if theirs is None:
        return mine
    if mine is None:
        return list(theirs)
    return [min(mine[0], theirs[0]), max(mine[1], theirs[1])]


def _decode_unnormalised(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> list:
    count = sum(loaded["events"])
    if not (isinstance(raw, list) and len(raw) == 2 and all(type(v) is int and 0 <= v <= count for v in raw)):
        raise ValueError(f"must be two ints in [0, {count}], got {describe(raw)}")
    return list(raw)


def _merge_cells(mine: dict, theirs: dict, acc: Any) -> dict:
    for key, w in theirs.items():
        mine[key] = mine.get(key, 0) + w  # (0: an int in units mode, 0 + w a float else)
    return mine


def _encode_cells(cells: dict, acc: Any) -> dict[str, Any]:
    k = _k(acc)
    return pack_dicts([{t * k + p: w for (t, p), w in cells.items()}], False)  # (residues: units mode)


def _decode_cells(raw: Any, acc: Any, loaded: Mapping[str, Any]) -> dict[tuple[int, int], Any]:
    """The cells (in units when the packed cells have residues or a weight that is not whole)."""
    events, weights = loaded["events"], values_of(loaded["weights"])
    k = len(events)
    _, keys, exact_w = unpack_flat(raw, 1, False, min(k * k, sum(events)), positive=False, exact_weights=True)
    w = _floats(exact_w)
    if len(keys) and (keys[0] < 0 or keys[-1] >= k * k):
        raise ValueError(f"cell indices must be true * {k} + argmax in [0, {k * k})")
    t = keys // k
    if len(t) and not np.asarray(events)[t].all():
        raise ValueError("a cell names a class without events")
    rows = np.bincount(t, weights=w, minlength=k)
    for c in range(k):
        if abs(rows[c] - weights[c]) > 1e-9 * max(1.0, weights[c]):
            raise ValueError(f"cells of class {c} do not sum to weights[{c}]")
    return {(int(x) // k, int(x) % k): v for x, v in zip(keys.tolist(), exact_w.tolist())}


def _copy_opt(v: list | None) -> list | None:
    return None if v is None else list(v)


_MULTICLASS_STATE = (
    # events per true class (zero weights included) and summed weight per true class
    Field("events", lambda acc: [0] * _k(acc), "counts",
          decode=lambda raw, acc, ld: decode_list(raw, "count", _k(acc))),
    # (the summed weights below are floats while every weight is whole, else exact units
    # (kernels.exact_weights): written as floats, plus optional residues when not exact)
    Field(("weights", "weights_residues"), lambda acc: [0.0] * _k(acc), attrs="_weights", merge=_add_lists,
          copy=list, encode=lambda v, acc: encode_sums(v), decode=_decode_weights, optional=("weights_residues",)),
    # weight of events whose true class has rank r in its row
    Field(("ranks", "ranks_residues"), lambda acc: [0.0] * _k(acc), attrs="_ranks", merge=_add_lists, copy=list,
          encode=lambda v, acc: encode_sums(v), decode=_decode_ranks, optional=("ranks_residues",)),
    # two classes: weight of top-1 hits of scikit-learn's binary rule at the thresholds
    # 0.5 and 0, and whether a score of classes[1] outside [0, 1] was seen
    Field(("binary_top1", "binary_top1_residues"), lambda acc: [0.0, 0.0, False] if _k(acc) == 2 else None,
          attrs="_top1", merge=_merge_top1, copy=_copy_opt, encode=_encode_top1, decode=_decode_top1,
          optional=("binary_top1_residues",)),
    # exact (kernels.exact_sum): the rounded sum and the rest of its expansion (order-independent)
    Field(("log_loss_sum", "log_loss_residue"), lambda acc: LogLossSum(), attrs="_log_loss_sum",
          merge=lambda a, b, acc: a.merge(b), copy=lambda v: v.copy(), encode=_encode_log_loss,
          decode=_decode_log_loss),
    # [min, max] of scores outside [0, 1]
    Field("outside_unit", lambda acc: None, attrs="_outside", merge=_merge_outside, copy=_copy_opt,
          encode=lambda v, acc: _copy_opt(v), decode=lambda raw, acc, ld: _outside_from_json(raw)),
    # rows failing roc_auc's / log_loss's sum-to-1 test
    Field("unnormalised_rows", lambda acc: [0, 0], "counts", attrs="_unnormalised", decode=_decode_unnormalised),
    # (true, argmax) -> weight, packed: keys true * K + argmax (see kernels.histogram_json)
    Field("cells", lambda acc: {}, attrs="_cells", merge=_merge_cells, copy=dict,
          encode=_encode_cells, decode=_decode_cells),
    # the binning in force (null: exact scores) and H[t][c], the column-c scores of the
    # events of true class t, packed (histogram id t * K + c); and the one-vs-rest set (OvR
    # and micro AUC, average precision): per column c the scores of the events of the other
    # classes N[c] and of class c P[c] (id 2 c + is_c), in a budget of its own, so that they
    # keep their resolution however many pair histograms there are; not kept (null) while
    # the pair histograms are exact: it is then their sums. One field: merged together.
    Field(("bins_per_octave", "histograms", "ovr_bins_per_octave", "ovr_histograms"), _fresh_all,
          attrs=("_binning", "_h", "_obinning", "_ovr"), merge=_merge_all, copy=_copy_all,
          encode=_encode_all, decode=_decode_all),
)


class MulticlassScores(ScoreColumns):
    """Top-k accuracy, log loss, ROC AUC (one-vs-rest / one-vs-one, with guaranteed
    bounds), average precision and the arg-max confusion matrix of a stream of
    ``(y_true, scores, weight)`` events.

    ``classes``: at least two distinct labels (int, str or bool, one kind); score rows
    are aligned with them. Two sets of score histograms, each within the budget of
    :class:`~streammetrics.metrics.score_columns.ScoreColumns`: the ``K * K`` pair
    histograms (one-vs-one AUC) and ``2 K`` one-vs-rest ones (OvR and micro AUC, average
    precision), so that OvR keeps its resolution however many classes there are. Each set
    holds exact scores while it has at most ``max_exact`` (default 8,192) entries, so that
    a small window's metrics equal scikit-learn's; beyond, the log grid with ``bins``
    (default 64) bins per octave, coarsened for the whole set while it holds more than
    ``max_bins`` (default 65,536) entries; ``roc_auc_bounds`` then says how far off the AUCs
    can be. Entries never exceed ``max(max_bins, 8 * K * K)`` and ``max(max_bins, 16 * K)``
    (the coarsest grid), nor ``K`` per event and set. ``exact=True`` keeps every score
    (unbounded): every metric equals scikit-learn's (see the module docstring for the few
    documented departures).

    >>> small = MulticlassScores([0, 1, 2], max_exact=5).update(0, [0.5, 0.3, 0.2])
    >>> small.exact, small.update(1, [0.1, 0.8, 0.1]).exact, small.bins_per_octave
    (True, False, 64)

    >>> m = MulticlassScores(["a", "b", "c"])
    >>> m = m.update_many(["a", "b", "c"], [[0.7, 0.2, 0.1], [0.3, 0.4, 0.3], [0.2, 0.5, 0.3]])
    >>> round(m.top_k_accuracy(k=1), 4), m.top_k_accuracy(k=2), m.roc_auc()
    (0.6667, 1.0, 0.75)
    """

    # the declared state (see _MULTICLASS_STATE)
    _events: list[int]
    _weights: list[Any]  # floats (float mode) or units (kernels.exact_weights)
    _ranks: list[Any]
    _top1: list | None
    _log_loss_sum: LogLossSum
    _outside: list[float] | None
    _unnormalised: list[int]
    _cells: dict[tuple[int, int], Any]
    _h: list[list[ScoreHistogram]]
    _obinning: Binning
    _ovr: tuple[list[ScoreHistogram], list[ScoreHistogram]]

    type_name = "MulticlassScores"
    state_fields = _MULTICLASS_STATE
    #: version 2 packs the histograms and cells and bounds them; version 3: exact log-loss sum
    #: (``log_loss_residue``); versions 1 and 2 still load
    version = 3
    migrations = {1: _migrate_v1, 2: _migrate_v2}

    def __init__(
        self, classes: Sequence[Hashable], bins: int | None = 64, exact: bool = False,
        max_bins: int | None = DEFAULT_MAX_BINS, max_exact: int | None = DEFAULT_MAX_EXACT,
    ) -> None:
        self._cols = Columns(check_label_list(classes, "classes", minimum=2), "class", "classes")
        self.setup_budget(bins, exact, max_bins, max_exact)
        self.reset()

    # ------------------------------------------------------------------ state
    def _hist_list_of(self, h: list) -> list[ScoreHistogram]:
        return [x for row in h for x in row]

    def _hist_list(self) -> list[ScoreHistogram]:
        return [x for row in self._h for x in row]

    def _refresh(self) -> None:
        self._ovr_memo: dict[Any, Any] = {}  # (see _ovr_parts; emptied by every change of the state)
        # units mode (kernels.exact_weights): every summed weight is an int of units then
        self._units = self._weights[0].__class__ is int
        self._hw = [[h.weights for h in row] for row in self._h]
        self._key = None if self._binning.exact else self._binning.key
        self._entries = sum(len(d) for row in self._hw for d in row)
        self._over = self.entry_limit()
        # the one-vs-rest set is kept only once the pairs are on a grid (None: derived)
        self._ow = None if self._binning.exact else [(a.weights, b.weights) for a, b in zip(*self._ovr)]
        self._okey = None if self._obinning.exact else self._obinning.key
        self._oentries = sum(len(a) + len(b) for a, b in self._ow or ())
        self._oover = _INF if self._ow is None else self.entry_limit_of(self._obinning)
        self._same_key = self._binning == self._obinning

    def fit_budget(self) -> None:
        """Bring the pair histograms within the budget; when they leave exact scores, the
        one-vs-rest set (their sums until then) is kept from then on, within its own."""
        if not self._binning.exact:
            super().fit_budget()
            return
        neg, pos = _derive_ovr(self._binning, self._h, _k(self))  # before the pairs change
        self._binning, self._entries = self.fit_set(self._hist_list(), self._binning, self._entries)
        if not self._binning.exact:
            ovr = _ovr_list((neg, pos))
            self._obinning = self.fit_set(ovr, ExactBinning(), sum(len(h) for h in ovr))[0]
            self._ovr = (neg, pos)
        self._refresh()

    def _fit_ovr(self) -> None:
        """Bring the one-vs-rest set within the budget."""
        self._obinning, self._oentries = self.fit_set(_ovr_list(self._ovr), self._obinning, self._oentries)
        self._refresh()

    def _ovr_view(self) -> tuple[Binning, tuple[list, list]]:
        """The one-vs-rest set and its binning (the sums of the pairs while they are exact)."""
        return _ovr_of(self._binning, self._h, self._obinning, self._ovr, _k(self))

    def _check_merge(self, other: Accumulator) -> None:
        assert isinstance(other, MulticlassScores)
        if math.fsum(values_of(self._weights)) + math.fsum(values_of(other._weights)) > MAX_TOTAL_WEIGHT:
            raise ValueError(f"merged weight would exceed {MAX_TOTAL_WEIGHT:g}")

    # ------------------------------------------------------------------ exact weight sums
    def _to_units(self) -> None:
        """Switch to units mode: every summed weight (class weights, ranks, binary top-1
        hits, cells, both histogram sets) converted exactly to units of ``2**-1074``. The
        state (its JSON) does not change; later weights are summed exactly."""
        self._weights = [to_units(x) for x in self._weights]
        self._ranks = [to_units(x) for x in self._ranks]
        if self._top1 is not None:
            self._top1 = [to_units(self._top1[0]), to_units(self._top1[1]), self._top1[2]]
        self._cells = {key: to_units(x) for key, x in self._cells.items()}
        hists_to_units(self._hist_list())
        hists_to_units(_ovr_list(self._ovr))
        self._refresh()

    def _whole_total(self) -> float:
        """The total weight in float mode (bounds every summed weight: see :meth:`ScoreColumns.merge`)."""
        return float(sum(self._weights))

    def _check_state(self, loaded: dict[str, Any]) -> None:
        """Decode rule of exact weight sums: units mode for every container as soon as one
        of them is (a residue, or a summed weight that is not whole), else float mode."""
        top1 = loaded["binary_top1"]
        _, h, _, ovr = loaded["bins_per_octave"]
        hists = [x for row in h for x in row] + _ovr_list(ovr)
        # each container was decoded all in units or all in floats: its first value tells
        firsts = [loaded["weights"][0], loaded["ranks"][0], next(iter(loaded["cells"].values()), 0.0),
                  *(top1[:1] if top1 is not None else ()),
                  *(next(iter(x.weights.values())) for x in hists if x.weights)]
        if not any(x.__class__ is int for x in firsts):
            return
        loaded["weights"] = [to_units(x) for x in loaded["weights"]]
        loaded["ranks"] = [to_units(x) for x in loaded["ranks"]]
        if top1 is not None:
            loaded["binary_top1"] = [to_units(top1[0]), to_units(top1[1]), top1[2]]
        loaded["cells"] = {key: to_units(x) for key, x in loaded["cells"].items()}
        hists_to_units(hists)

    def _weight_values(self) -> list[float]:
        """The class weights as floats (correctly rounded in units mode)."""
        return values_of(self._weights) if self._units else self._weights

    def _predicted_weights(self) -> list[float]:
        """Weight per arg-max class (column sums of the cells), exact then rounded."""
        k = _k(self)
        out: list[Any] = [0] * k if self._units else [0.0] * k
        for (_, p), w in self._cells.items():  # (exact in either mode: any order)
            out[p] += w
        return values_of(out)

    @classmethod
    def _check_config(cls, config: Mapping[str, Any]) -> None:
        super()._check_config(config)
        classes = config.get("classes")
        cap = _state_mod.LIMITS.max_histograms
        if isinstance(classes, list) and len(classes) ** 2 + 2 * len(classes) > cap:
            raise ValueError(f"config['classes'] has {len(classes)} classes: {len(classes)}**2 + 2 * "
                             f"{len(classes)} score histograms exceed max_histograms={cap}")

    @property
    def classes(self) -> list:
        """The classes, in score-column order."""
        return list(self._cols.names)

    @property
    def count(self) -> int:  # type: ignore[override]  # a read-only property over the declared state
        """Number of events seen (zero-weight events included)."""
        return sum(self._events)

    @property
    def total_weight(self) -> float:  # type: ignore[override]  # a read-only property over the declared state
        """Summed weight of the events seen."""
        return value_of(sum(self._weights)) if self._units else float(sum(self._weights))

    def _see_outside(self, lo: float, hi: float) -> None:
        if self._outside is None:
            self._outside = [lo, hi]
        else:
            self._outside = [min(self._outside[0], lo), max(self._outside[1], hi)]

    # ------------------------------------------------------------------ updates
    def _true_index(self, y_true: Any, name: str) -> int:
        t = self._cols.find(y_true, name)
        if t is None:
            raise ValueError(f"{name}={to_builtin_label(y_true, name)!r} is not one of classes {self._cols.names!r}")
        return t

    def update(self, y_true: Hashable, scores: Any, weight: float = 1.0) -> "MulticlassScores":
        """Add one event: ``y_true`` one of ``classes``, ``scores`` a sequence aligned with
        ``classes`` or a mapping class -> score (finite numbers), ``weight >= 0``."""
        self._ovr_memo = {}
        cols = self._cols
        t = cols.index.get(y_true) if y_true.__class__ is cols.fast else None
        if t is None:
            t = self._true_index(y_true, "y_true")
        row = cols.row(scores, "scores")
        if weight.__class__ is not float or not 0.0 <= weight < _INF:
            weight = check_weight(weight)
        if self._units or (weight != 1.0 and (not (weight.is_integer() and weight <= WHOLE_MAX)
                                              or sum(self._weights) + weight > _FLOAT_EXACT)):
            add: Any = UNIT if weight == 1.0 else units_of(weight)  # exact sums (kernels.exact_weights)
            total = to_units(self._weights[t]) + add
            if total > _MAX_UNITS:
                raise ValueError(f"weight {weight!r} would make the class weight exceed {MAX_TOTAL_WEIGHT:g}")
            if not self._units:
                self._to_units()  # the same state, in units
        else:  # float mode: every weight so far whole, sums exact as floats
            add = weight
            total = self._weights[t] + weight
            if total > MAX_TOTAL_WEIGHT:
                raise ValueError(f"weight {weight!r} would make the class weight exceed {MAX_TOTAL_WEIGHT:g}")
        # ---- nothing below can fail
        if weight:
            # H[t][c] and the one-vs-rest N[c] / P[c] (c == t): one key when both sets are on
            # the same binning (exact: the score itself, -0.0 read as 0.0)
            hw, ow, key, okey = self._hw[t], self._ow, self._key, self._okey
            new = onew = 0
            if ow is None:  # exact pairs: the one-vs-rest set is their sums, not kept
                for d, s in zip(hw, row):
                    s += 0.0
                    old = d.get(s)
                    if old is None:
                        d[s] = add
                        new += 1
                    else:
                        d[s] = old + add
            else:
                same = self._same_key
                assert key is not None  # pairs on a grid
                for c, s in enumerate(row):
                    k = key(s)
                    d = hw[c]
                    old = d.get(k)
                    if old is None:
                        d[k] = add
                        new += 1
                    else:
                        d[k] = old + add
                    if not same:
                        k = s + 0.0 if okey is None else okey(s)
                    d = ow[c][c == t]
                    old = d.get(k)
                    if old is None:
                        d[k] = add
                        onew += 1
                    else:
                        d[k] = old + add
            if new or onew:
                self._entries += new
                self._oentries += onew
                if self._entries > self._over:
                    self.fit_budget()  # recounts both sets
                if self._oentries > self._oover:
                    self._fit_ovr()
        st = row[t]
        rank = 0
        for c, s in enumerate(row):
            if s > st or (s == st and c > t):
                rank += 1
        self._ranks[rank] += add
        lo, hi = min(row), max(row)
        cell = (t, row.index(hi))
        self._cells[cell] = self._cells.get(cell, 0) + add  # (0 + a float is a float)
        top1 = self._top1
        if top1 is not None:
            s1, is1 = row[1], t == 1
            if (s1 > 0.5) == is1:
                top1[0] += add
            if (s1 > 0.0) == is1:
                top1[1] += add
            if not 0.0 <= s1 <= 1.0:
                top1[2] = True
        if lo >= 0.0 and hi <= 1.0:
            p = st if st >= _EPS else _EPS
            if p > _ONE_MINUS_EPS:
                p = _ONE_MINUS_EPS
            self._log_loss_sum.add_log(weight, p)
        else:
            bad = [s for s in row if not 0.0 <= s <= 1.0]
            self._see_outside(min(bad), max(bad))
        total_s: float = reduce(_add, row)
        gap = abs(1.0 - total_s)
        if not gap <= 1e-8 + 1e-5 * abs(total_s):
            self._unnormalised[0] += 1
        if not gap <= _LOG_LOSS_SUM_TOL:
            self._unnormalised[1] += 1
        self._weights[t] = total
        self._events[t] += 1
        return self

    def _encode(self, y_true: Any, name: str) -> np.ndarray:
        """Class indices of a batch of labels (validated: each one of ``classes``)."""
        cols = self._cols
        if y_true.__class__ is list:  # (a window's labels: looked up, when all of the classes' own type)
            get, fast = cols.index.get, cols.fast
            found = [get(v) if v.__class__ is fast else None for v in y_true]
            if None not in found:
                return np.array(found, dtype=np.intp)
        y = as_label_array(y_true, name)
        kind = array_kind(y, name)
        if len(y) == 0:
            return np.zeros(0, dtype=np.intp)
        uniq, inverse = np.unique(y, return_inverse=True)
        inverse = inverse.reshape(-1)
        codes = np.empty(len(uniq), dtype=np.intp)
        for j, label in enumerate(uniq.tolist()):
            c = cols.index.get(label) if kind == cols.kind else None
            if c is None:
                i = int(np.argmax(inverse == j))
                raise ValueError(f"{name}[{i}]={label!r} is not one of classes {cols.names!r}")
            codes[j] = c
        return codes[inverse]

    def update_many(self, y_true: Any, score_matrix: Any, sample_weight: Any = None) -> "MulticlassScores":
        """Add a batch: labels, an ``(n, K)`` score matrix (array, nested lists, DataFrame,
        or a list of mappings) and optional weights; validated in full before any change."""
        self._ovr_memo = {}
        fresh = not self._entries and self._binning.exact and not self._units  # (see the end)
        t = self._encode(y_true, "y_true")
        S = self._cols.matrix(score_matrix, "score_matrix")
        n = check_same_length(y_true=t, score_matrix=S)
        w = as_weight_array(sample_weight, n)
        if n == 0:
            return self
        k = len(self._cols.names)
        # units mode (exact sums, kernels.exact_weights) once a weight is not whole
        units = (self._units or (w is not None and not all_whole(w))
                 or sum(self._weights) + (float(n) if w is None else float(w.sum())) > _FLOAT_EXACT)
        wu = (np.ones(n) if w is None else w) if units else None
        totals: list[Any]
        if wu is not None:
            class_u = units_by_key(t, wu)
            totals = [to_units(a) + class_u.get(c, 0) for c, a in enumerate(self._weights)]
            if max(totals) > _MAX_UNITS:
                raise ValueError(f"sample_weight would make a class weight exceed {MAX_TOTAL_WEIGHT:g}")
        else:
            class_w = np.bincount(t, weights=w, minlength=k).astype(np.float64)
            totals = [a + b for a, b in zip(self._weights, class_w.tolist())]
            if max(totals) > MAX_TOTAL_WEIGHT:
                raise ValueError(f"sample_weight would make a class weight exceed {MAX_TOTAL_WEIGHT:g}")
        flat, binning = self.batch_flat(S, lambda c: t, k, k, list(range(k)), w, units=units)

        def ovr_batch(state: Binning) -> tuple:
            return self.batch_flat(S, lambda c: (t == c).astype(np.int64), 2, 1, [2 * c for c in range(k)], w,
                                    state, units)

        oflat = None if self._binning.exact else ovr_batch(self._obinning)
        rows = np.arange(n)
        st = S[rows, t]
        rank = _ranks(S, t, st)
        argmax = S.argmax(axis=1)
        code = t * k + argmax
        cells: dict[int, Any]  # cell code -> weight added (cells of zero-weight events too)
        if wu is not None:
            cells = units_by_key(code, wu)
        else:
            cell_w = np.bincount(code, weights=w, minlength=k * k)
            cells = {c: float(cell_w[c]) for c in np.flatnonzero(np.bincount(code, minlength=k * k)).tolist()}
        top1: list | None = None
        if self._top1 is not None:
            s1, is1 = S[:, 1], t == 1
            hits = [(s1 > 0.5) == is1, (s1 > 0.0) == is1]
            if wu is not None:
                top1 = [exact_units(wu[h]) for h in hits]
            else:
                top1 = [float(h.sum()) if w is None else float(w[h].sum()) for h in hits]
            top1.append(bool(((s1 < 0.0) | (s1 > 1.0)).any()))
        inside = (S >= 0.0).all(axis=1) & (S <= 1.0).all(axis=1)
        ww = inside.astype(np.float64) if w is None else np.where(inside, w, 0.0)
        clipped = np.clip(st, _EPS, _ONE_MINUS_EPS)
        outside = None
        if not inside.all():
            v = S[~inside]
            v = v[(v < 0.0) | (v > 1.0)]
            outside = (float(v.min()), float(v.max()))
        total_s = S[:, 0].copy()
        for c in range(1, k):  # left to right, as update() sums a row
            total_s += S[:, c]
        d = np.abs(1.0 - total_s)
        unnorm = [int(np.count_nonzero(~(d <= 1e-8 + 1e-5 * np.abs(total_s)))),
                  int(np.count_nonzero(~(d <= _LOG_LOSS_SUM_TOL)))]
        rank_w: dict[int, Any] = units_by_key(rank, wu) if wu is not None else dict(
            enumerate(np.bincount(rank, weights=w, minlength=k).tolist()))
        # ---- commit: nothing below can fail
        if units and not self._units:
            self._to_units()  # the same state, in units
        if oflat is not None:
            self._obinning, self._oentries = self.add_set(_ovr_list(self._ovr), self._obinning, self._oentries,
                                                           *oflat)
            self._binning, self._entries = self.add_set(self._hist_list(), self._binning, self._entries,
                                                         flat, binning)
        else:  # exact pairs: if they leave exact, keep the one-vs-rest set from here on
            # (the sums before the batch, needed only if it can take the pairs past max_exact)
            leave = not binning.exact or self._entries + len(flat[0]) > self.entry_limit()
            pre = _derive_ovr(self._binning, self._h, k) if leave else None
            self._binning, self._entries = self.add_set(self._hist_list(), self._binning, self._entries,
                                                         flat, binning)
            if not self._binning.exact:
                assert pre is not None  # (leaving exact scores: leave was true)
                ovr = _ovr_list(pre)
                self._obinning = self.add_set(ovr, ExactBinning(), sum(len(h) for h in ovr),
                                               *ovr_batch(ExactBinning()))[0]
                self._ovr = pre
        self._refresh()
        for r, v in rank_w.items():
            self._ranks[r] += v
        for c, v in cells.items():
            cell = (c // k, c % k)
            self._cells[cell] = self._cells.get(cell, 0) + v
        if top1 is not None:
            mine = self._top1
            assert mine is not None  # two classes: both are lists
            self._top1 = [mine[0] + top1[0], mine[1] + top1[1], mine[2] or top1[2]]
        self._log_loss_sum.add_logs(ww, clipped)  # exact: the per-event path's terms
        if outside is not None:
            self._see_outside(*outside)
        self._unnormalised = [a + b for a, b in zip(self._unnormalised, unnorm)]
        for c, v in enumerate(np.bincount(t, minlength=k).tolist()):
            self._events[c] += v
        self._weights = totals
        if fresh and binning.exact and self._binning.exact and not self._units:
            self._ovr_memo["flat"] = flat  # (the pair histograms hold exactly this batch: _flat)
        return self

    # ------------------------------------------------------------------ metrics
    def top_k_accuracy(self, k: int = 2, normalize: bool = True) -> float:
        """``sklearn.metrics.top_k_accuracy_score(y_true, scores, k=k, labels=classes)``:
        the weight share (``normalize=False``: the weight) of events whose true class is
        among the ``k`` highest scores, tied scores ranking the higher class index first.
        Two classes: scikit-learn's binary rule on the score of ``classes[1]``."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ValueError(f"k must be an int >= 1, got {k!r}")
        if not isinstance(normalize, (bool, np.bool_)):
            raise TypeError(f"normalize must be a bool, got {normalize!r}")
        n_classes = len(self._cols.names)
        if k >= n_classes:
            warnings.warn(
                f"'k' ({k}) greater than or equal to 'n_classes' ({n_classes}) will result in a "
                "perfect score and is therefore meaningless.",
                UndefinedMetricWarning,
                stacklevel=2,
            )
        total = self.total_weight
        if self._top1 is not None and k == 1:
            hits = values_of([self._top1[1] if self._top1[2] else self._top1[0]])[0]
        elif self._units:  # exact, then rounded
            hits = value_of(sum(self._ranks[: min(k, n_classes)]))
        else:
            hits = math.fsum(self._ranks[: min(k, n_classes)])
        if not normalize:
            return float(hits)
        if not total > 0:
            return warn_no_events("top_k_accuracy")
        return hits / total

    def log_loss(self) -> float:
        """``sklearn.metrics.log_loss(y_true, scores, labels=classes, sample_weight=...)``:
        the weighted mean of ``-log(clip(s_t, eps, 1 - eps))`` (float64 eps), ``s_t`` the
        score of the true class, rows *not* renormalised (scikit-learn only warns, with a
        ``UserWarning``, when a row does not sum to 1). ``ValueError`` once a score outside
        [0, 1] has been seen."""
        if self._outside is not None:
            lo, hi = self._outside
            raise ValueError(
                "log_loss is defined for scores in [0, 1] (probabilities), but scores outside "
                f"it were seen (from {lo!r} to {hi!r})"
            )
        total = self.total_weight
        if not total > 0:
            return warn_no_events("log_loss")
        if self._unnormalised[1]:
            warnings.warn(
                "The y_prob values do not sum to one. Make sure to pass probabilities.",
                UserWarning,
                stacklevel=2,
            )
        return self._log_loss_sum.value / total

    def confusion(self) -> ConfusionMatrix:
        """:class:`~streammetrics.ConfusionMatrix` (``labels=classes``) of the arg-max
        predictions (ties: the first maximal score, as ``numpy.argmax``)."""
        return self._confusion().copy()

    def _confusion(self) -> ConfusionMatrix:
        """:meth:`confusion`, built once per state (see :meth:`_ovr_parts`; not to be changed)."""
        cm = self._ovr_memo.get("confusion")
        if cm is None:
            names = self._cols.names
            cells = self._cells
            counts = dict(zip([(names[t], names[p]) for t, p in cells], values_of(list(cells.values()))))
            cm = self._ovr_memo["confusion"] = ConfusionMatrix._from_counts(list(names), counts, self.count)
        return cm

    # ------------------------------------------------------------------ ranking
    def _columns(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per score column ``c``: ``(keys, W)``, ``W[t]`` the class-``t`` weights per key."""
        k = len(self._cols.names)
        return [aligned(*(self._h[t][c] for t in range(k))) for c in range(k)]

    def _ovr_columns(self, view: tuple | None = None) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """Per class ``c``: ``(keys, neg, pos)`` of the one-vs-rest set (binning
        ``_ovr_view()[0]``): the column-``c`` weights per key of the other classes' events
        and of class ``c``'s."""
        _, (negs, poss) = view or self._ovr_view()
        out = []
        for n, p in zip(negs, poss):
            keys, w = aligned(n, p)
            out.append((keys, w[0], w[1]))
        return out

    def _pooled(self, view: tuple | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(keys, [neg, pos])`` of every column's one-vs-rest histograms pooled (micro)."""
        binning, (negs, poss) = view or self._ovr_view()
        return aligned(summed(negs, binning), summed(poss, binning))

    def _ranking_inputs(self, name: str, multi_class: str | None, average: Any) -> None:
        """Validate the arguments of the ranking metrics; warn for unnormalised rows."""
        if multi_class is not None:
            if multi_class not in ("ovr", "ovo"):
                raise ValueError(f"multi_class must be 'ovr' or 'ovo', got {multi_class!r}")
            if multi_class == "ovo":
                if average is None:
                    raise ValueError("average=None is not implemented for multi_class='ovo'.")
                check_average(average, ("macro", "weighted"), "multi_class='ovo'")
            else:
                check_average(average, ("micro", "macro", "weighted", None), "multi_class='ovr'")
            if self._unnormalised[0]:
                warnings.warn(
                    f"{self._unnormalised[0]} of {self.count} score rows do not sum to 1, which "
                    "scikit-learn's roc_auc_score rejects ('Target scores need to be probabilities "
                    f"for multiclass roc_auc'); {name} is computed from the scores as given.",
                    UserWarning,
                    stacklevel=3,
                )
        else:
            check_average(average, ("micro", "macro", "weighted", None), name)

    def _roc(self, multi_class: str, average: Any, bounds: bool) -> tuple[Any, Any, Any]:
        """``(value, low, high)`` of the ROC AUC for ``multi_class`` / ``average`` (one-vs-rest
        macro, weighted or per class without ``bounds``: low and high None, not read)."""
        self._ranking_inputs("roc_auc", multi_class, average)
        k = len(self._cols.names)
        if not self.count:
            nan = warn_no_events("roc_auc")
            if average is None:
                return np.full(k, nan), np.full(k, nan), np.full(k, nan)
            return nan, nan, nan
        if multi_class == "ovo":
            return self._ovo(average, bounds)
        class_w = np.asarray(self._weight_values(), dtype=np.float64)
        if average == "weighted" and abs(float(class_w.sum())) <= 1e-8:
            return 0.0, 0.0, 0.0  # scikit-learn: weights summing to ~0 give 0, unchecked
        if average == "micro":
            view = self._ovr_view()
            keys, w = self._pooled(view)
            return binary_auc(view[0], keys, w[0], w[1], bounds)
        count = self.count
        for c in range(k):
            if not self._events[c] or self._events[c] == count:
                ranking.warn_one_class()
        parts = self._ovr_parts(bounds)
        weights = class_w if average == "weighted" else None
        low, high = average_intervals(parts[1], parts[2], average, weights) if bounds else (None, None)
        return average_scores(parts[0], average, weights), low, high

    def _ovr_parts(self, bounds: bool) -> np.ndarray:
        """``(3, K)``: per class the one-vs-rest ``binary_auc`` ``(value, low, high)`` (nan for a
        class absent or alone), computed once per state (a snapshot reads the macro, weighted and
        per-class AUCs and their intervals from it; the memo is emptied by every change)."""
        memo = self._ovr_memo
        got = memo.get(bounds)
        if got is None:
            k, count = len(self._cols.names), self.count
            binning, columns = self._ovr_cached()
            parts = np.full((3, k), np.nan)
            with warnings.catch_warnings(record=True) as caught:  # (given again at every read)
                warnings.simplefilter("always")
                for c, (keys, neg, pos) in enumerate(columns):
                    if self._events[c] and self._events[c] != count:
                        parts[:, c] = binary_auc(binning, keys, neg, pos, bounds)
            got = memo[bounds] = (parts, [(w.message, w.category) for w in caught])
            if binning.exact:  # (binary_auc's bounds are then the value: the same parts either way)
                memo[not bounds] = got
        parts, notes = got
        for message, category in notes:
            warnings.warn(message, category, stacklevel=3)
        return parts.copy()

    def _flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The pair histograms' entries flat (``kernels.histogram.flatten``): the batch that filled
        an empty accumulator while its scores stay exact (kept by :meth:`update_many`), else read."""
        got = self._ovr_memo.get("flat")
        return flatten(self._hist_list(), self._binning) if got is None else got

    def _ovr_cached(self) -> tuple[Binning, list[tuple[np.ndarray, np.ndarray, np.ndarray]]]:
        """``(binning, _ovr_columns())`` of the one-vs-rest set, built once per state (see
        :meth:`_ovr_parts`)."""
        memo = self._ovr_memo
        got = memo.get("columns")
        if got is None:
            if self._binning.exact and not self._units:
                got = (self._binning, _exact_ovr_columns(self._flat(), len(self._cols.names), 1))
            else:
                view = self._ovr_view()
                got = (view[0], self._ovr_columns(view))
            memo["columns"] = got
        return got

    @staticmethod
    def ovr_many(accs: Sequence["MulticlassScores"], confidences: Sequence[float] | None = None) -> None:
        """Compute the one-vs-rest columns and AUCs (:meth:`_ovr_parts`) of many accumulators at
        once and keep them as each one's own (the metrics and intervals read them; any change of
        the state forgets them): those in float mode with exact pair histograms, events, and weight
        on both sides of each class present; the others compute theirs when read. With
        ``confidences`` (one per accumulator), the classes' DeLong intervals of the ``roc_auc``
        intervals too. The same values (:func:`_exact_ovr_columns`,
        :func:`~streammetrics.kernels.ranking.roc_auc_rows`, :func:`_class_intervals`)."""
        groups: dict[int, list[MulticlassScores]] = {}
        for acc in accs:
            if acc._binning.exact and not acc._units and acc.count and "columns" not in acc._ovr_memo:
                groups.setdefault(len(acc._cols.names), []).append(acc)
        for k, members in groups.items():
            flats = [acc._flat() for acc in members]
            ids = np.concatenate([f[0] + i * k * k for i, f in enumerate(flats)])  # (accumulator i's at i k^2)
            flat = ids, np.concatenate([f[1] for f in flats]), np.concatenate([f[2] for f in flats])
            columns = _exact_ovr_columns(flat, k, len(members))
            for i, acc in enumerate(members):
                acc._ovr_memo["columns"] = (acc._binning, columns[i * k:(i + 1) * k])
        chosen, chosen_at = [], []
        levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        for i, acc in enumerate(accs):
            memo = acc._ovr_memo
            if False in memo or "columns" not in memo or not acc._binning.exact or acc._units or not acc.count:
                continue
            count = acc.count
            present = [bool(e) and e != count for e in acc._events]
            # weight on both sides of each class present (else: warnings, its own path): in float
            # mode the class weights are the sums of its column's P and of the others' N, exactly
            weights = acc._weights
            total = sum(weights)
            if all(w > 0 and total - w > 0 for w, p in zip(weights, present) if p):
                chosen.append((acc, present))
                chosen_at.append(i)
                levels.extend(c for c, p in zip(memo["columns"][1], present) if p)
        aucs = ranking.roc_auc_rows(*_padded(levels)).tolist() if levels else []
        at = 0
        for acc, present in chosen:
            parts = np.full((3, len(present)), np.nan)
            for c, p in enumerate(present):
                if p:
                    parts[:, c] = aucs[at]
                    at += 1
            acc._ovr_memo[False] = acc._ovr_memo[True] = (parts, [])  # (exact: the bounds are the value)
        if confidences is None:
            return
        # the classes' DeLong intervals of the accumulators whose roc_auc intervals are defined
        from streammetrics.kernels.intervals import z_value

        by_z: dict[float, list[tuple[MulticlassScores, list]]] = {}
        for (acc, present), confidence in zip(chosen, [confidences[i] for i in chosen_at]):
            if all(present) and acc._confusion().unit_weights:
                by_z.setdefault(z_value(confidence), []).append((acc, acc._ovr_levels()))
        for z, items in by_z.items():
            for (acc, _), classes in zip(items, _class_intervals([levels for _, levels in items], z)):
                acc._ovr_memo["intervals", z] = classes

    def _ovo(self, average: str, bounds: bool) -> tuple[float, float, float]:
        """Hand & Till: the mean (or weight-share weighted mean) over pairs of classes with
        weight of the two one-vs-one AUCs ``(A(a|b) + A(b|a)) / 2``."""
        class_w = self._weight_values()
        present = [c for c, w in enumerate(class_w) if w > 0]
        if len(present) < 2:
            warnings.warn(
                "ROC AUC (one-vs-one) needs at least two classes with a non-zero weight; "
                f"got {len(present)}.",
                UndefinedMetricWarning,
                stacklevel=3,
            )
            return math.nan, math.nan, math.nan
        columns = self._columns()
        total = self.total_weight
        pairs, prevalence = [], []
        for a, b in combinations(present, 2):
            ka, Wa = columns[a]
            kb, Wb = columns[b]
            ab = binary_auc(self._binning, ka, Wa[b], Wa[a], bounds)
            ba = binary_auc(self._binning, kb, Wb[a], Wb[b], bounds)
            pairs.append([(x + y) / 2 for x, y in zip(ab, ba)])
            prevalence.append((class_w[a] + class_w[b]) / total)
        parts = np.asarray(pairs).T
        weights = np.asarray(prevalence) if average == "weighted" else None
        low, high = average_intervals(parts[1], parts[2], average, weights)
        return float(np.average(parts[0], weights=weights)), low, high

    def interval(self, metric: str, confidence: float = 0.95, k: int = 2,
                 average: str = "macro") -> tuple[float, float] | None:
        """Confidence interval of ``top_k_accuracy`` (``k``: continuity-corrected Wilson on the hit
        count) or one-vs-rest ``roc_auc`` (``average`` ``"macro"`` or ``"weighted"``: the classes'
        DeLong intervals combined conservatively,
        :func:`~streammetrics.kernels.intervals.ovr_auc_interval`). None below the minimum rule
        and for weighted events (the state keeps no sums of squared weights; weights are read as
        unit when the arg-max confusion matrix is, :attr:`ConfusionMatrix.unit_weights`).
        ``log_loss`` has none: its variance needs the sum of squared log terms, not kept."""
        from streammetrics.kernels import intervals as iv

        if metric not in ("top_k_accuracy", "roc_auc"):
            raise ValueError(f"metric must be 'top_k_accuracy' or 'roc_auc', got {metric!r:.40}")
        check_average(average, ("macro", "weighted"), "the roc_auc interval")
        z = iv.z_value(confidence)
        if not self.count or not self._confusion().unit_weights:
            return None
        if metric == "top_k_accuracy":
            held = self._ovr_memo.get(("top_k", k, z), False)  # (top_k_intervals: made with others)
            if held is not False:
                return held
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hits = self.top_k_accuracy(k, normalize=False)
            return iv.as_pair(*iv.wilson_many(hits, self.total_weight, z))
        count = self.count
        if any(not e or e == count for e in self._events):
            return None
        levels = self._ovr_levels()
        classes = self._ovr_memo.get(("intervals", z))  # (the macro and weighted intervals share them)
        if classes is None and all(len(x[0]) for x in levels):
            classes = self._ovr_memo["intervals", z] = _class_intervals([levels], z)[0]
        weights = np.asarray(self._weight_values(), dtype=np.float64) if average == "weighted" else None
        return iv.ovr_auc_interval(levels, weights, confidence, classes=classes)

    @staticmethod
    def top_k_intervals(accs: Sequence["MulticlassScores"], confidences: Sequence[float], k: int = 2) -> None:
        """:meth:`interval` ``("top_k_accuracy", confidence, k)`` of many accumulators at once (one
        :func:`~streammetrics.kernels.intervals.wilson_many` over their hit counts per
        confidence), kept as each one's own (any change of the state forgets it); the same pairs."""
        from streammetrics.kernels import intervals as iv

        by_z: dict[float, list[MulticlassScores]] = {}
        for acc, confidence in zip(accs, confidences):
            if acc.count and acc._confusion().unit_weights:
                by_z.setdefault(iv.z_value(confidence), []).append(acc)
        for z, members in by_z.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                hits = [acc.top_k_accuracy(k, normalize=False) for acc in members]
            low, high = iv.wilson_many(np.asarray(hits, dtype=np.float64),
                                       np.asarray([acc.total_weight for acc in members], dtype=np.float64), z)
            for acc, a, b in zip(members, low.tolist(), high.tolist()):
                acc._ovr_memo["top_k", k, z] = None if math.isnan(a) or math.isnan(b) else (a, b)  # (as_pair)

    def _ovr_levels(self) -> list[tuple[np.ndarray, np.ndarray, float, float]]:
        """Per class ``(neg, pos, low, high)``: the one-vs-rest levels and AUC bounds the intervals read."""
        parts = self._ovr_parts(True)
        return [(np.asarray(neg, dtype=np.float64), np.asarray(pos, dtype=np.float64), parts[1, c], parts[2, c])
                for c, (_, neg, pos) in enumerate(self._ovr_cached()[1])]

    def roc_auc(self, multi_class: str = "ovr", average: str | None = "macro") -> Any:
        """``sklearn.metrics.roc_auc_score(y_true, scores, multi_class=..., average=...,
        labels=classes)``. ``"ovr"``: class ``c`` (column ``c``) against the rest, averaged
        by ``"macro"`` (nan if a class is absent), ``"weighted"`` (by class weight),
        ``"micro"`` (pooled) or ``None`` (an array); ``"ovo"``: Hand & Till's mean over
        pairs of ``(A(a|b) + A(b|a)) / 2``, ``"weighted"`` by pair prevalence. Tied scores,
        and with bins scores in one bin, count half a pair."""
        return self._roc(multi_class, average, False)[0]

    def roc_auc_bounds(self, multi_class: str = "ovr", average: str | None = "macro") -> tuple[Any, Any]:
        """``(low, high)`` guaranteed to contain the exact :meth:`roc_auc` of the events seen:
        each binary AUC is bounded as in :meth:`BinaryScores.roc_auc_bounds` (pairs of
        scores in one bin, however wide, count all wrong / all right) and the bounds are
        averaged with the same (non-negative) weights as the values. ``(auc, auc)`` up to the
        float rounding of the weight sums (:func:`rounded_exact_bounds`) while
        the histograms used are exact (the one-vs-rest set for ``"ovr"``, the pair
        histograms for ``"ovo"``); arrays for ``average=None``."""
        exact = self._binning.exact or (multi_class != "ovo" and self._obinning.exact)
        value, low, high = self._roc(multi_class, average, not exact)
        if exact:
            return rounded_exact_bounds(value, self._entries + self._oentries + 2 * _k(self))
        return low, high

    def average_precision(self, average: str | None = "macro") -> Any:
        """``sklearn.metrics.average_precision_score`` of the one-hot targets (labels =
        classes) against the score columns: per class the step sum
        ``sum((R[n] - R[n-1]) * P[n])``, averaged by ``"macro"``, ``"weighted"`` (class
        weight), ``"micro"`` (pooled) or ``None``. With all classes present and more than
        two, this is ``average_precision_score(y_true, scores, average=...)``."""
        self._ranking_inputs("average_precision", None, average)
        k = len(self._cols.names)
        if not self.count:
            nan = warn_no_events("average_precision")
            return np.full(k, nan) if average is None else nan
        class_w = np.asarray(self._weight_values(), dtype=np.float64)
        if average == "weighted" and abs(float(class_w.sum())) <= 1e-8:
            return 0.0
        if average == "micro":
            _, w = self._pooled()
            return ranking.average_precision(w[0], w[1])
        values = np.array([ranking.average_precision(neg, pos) for _, neg, pos in self._ovr_cached()[1]])
        return average_scores(values, average, class_w if average == "weighted" else None)


def _exact_ovr_columns(flat: tuple[np.ndarray, np.ndarray, np.ndarray], k: int,
                       accumulators: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """``_ovr_columns()`` of exact pair histograms ``H[t][c]`` in float mode, in one pass over
    their entries (``flat``: :meth:`MulticlassScores._flat`, of one or several accumulators of
    ``k`` classes, histogram id ``i``: accumulator ``i // k**2``, ``t = i // k % k``, ``c = i % k``):
    per accumulator and column ``c`` the distinct scores ascending, ``N[c]`` (the other classes'
    weight at each) and ``P[c]`` (class ``c``'s). Float weights are whole, so any order of
    addition is exact (the sums of :func:`_derive_ovr`)."""
    ids, keys, w = flat
    col = ids // (k * k) * k + ids % k  # (accumulator, column)
    pos = ids // k % k == ids % k
    order = np.lexsort((keys, col))
    col, keys, w, pos = col[order], keys[order], w[order], pos[order]
    new = np.ones(len(keys), dtype=bool)
    new[1:] = (col[1:] != col[:-1]) | (keys[1:] != keys[:-1])
    starts = np.flatnonzero(new)
    if len(starts):
        neg_w = np.add.reduceat(np.where(pos, 0.0, w), starts)
        pos_w = np.add.reduceat(np.where(pos, w, 0.0), starts)
    else:
        neg_w = pos_w = np.zeros(0)
    keys = keys[starts]
    edges = np.searchsorted(col[starts], np.arange(accumulators * k + 1)).tolist()
    return [(keys[a:b], neg_w[a:b], pos_w[a:b]) for a, b in zip(edges[:-1], edges[1:])]


def _padded(levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(neg, pos, n)``: the ``(keys, neg, pos)`` levels as rows (zeros after each row's ``n[i]``)."""
    n = np.array([len(keys) for keys, _, _ in levels], dtype=np.int64)
    inside = np.arange(int(n.max()) if len(n) else 0) < n[:, None]
    neg, pos = np.zeros(inside.shape), np.zeros(inside.shape)
    neg[inside] = np.concatenate([x[1] for x in levels])
    pos[inside] = np.concatenate([x[2] for x in levels])
    return neg, pos, n


def _class_intervals(windows: list[list[tuple[np.ndarray, np.ndarray, float, float]]],
                     z: float) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per window (its classes' ``(neg, pos, low, high)``, each with levels), the classes'
    :func:`~streammetrics.kernels.intervals.auc_intervals` ``(low, high)``, every window's in one
    call (whole counts: the same values as one window's alone)."""
    from streammetrics.kernels.intervals import auc_intervals

    levels = [x for window in windows for x in window]
    sizes = [len(x[0]) for x in levels]
    lo, hi = auc_intervals(np.cumsum([0] + sizes[:-1]), np.concatenate([x[0] for x in levels]),
                           np.concatenate([x[1] for x in levels]), [x[2] for x in levels],
                           [x[3] for x in levels], z)
    out, at = [], 0
    for window in windows:
        out.append((lo[at:at + len(window)], hi[at:at + len(window)]))
        at += len(window)
    return out


def _ranks(S: np.ndarray, t: np.ndarray, st: np.ndarray) -> np.ndarray:
    """Rank of the true class in each row: ``#{c: s_c > s_t} + #{c > t: s_c == s_t}``."""
    n, k = S.shape
    out = np.empty(n, dtype=np.intp)
    cols = np.arange(k)
    for lo in range(0, n, _ROW_BLOCK):
        s = S[lo : lo + _ROW_BLOCK]
        ref = st[lo : lo + _ROW_BLOCK, None]
        above = s > ref
        above |= (s == ref) & (cols > t[lo : lo + _ROW_BLOCK, None])
        out[lo : lo + _ROW_BLOCK] = above.sum(axis=1)
    return out


def _outside_from_json(outside: Any) -> list[float] | None:
    if outside is None:
        return None
    if not isinstance(outside, list) or len(outside) != 2:
        raise ValueError(f"outside_unit must be null or [min, max], got {outside!r}")
    out = [check_number(v, f"outside_unit[{i}]") for i, v in enumerate(outside)]
    if out[0] > out[1] or any(0.0 <= v <= 1.0 for v in out):
        raise ValueError(f"outside_unit must be [min, max] of scores outside [0, 1], got {out!r}")
    return out
