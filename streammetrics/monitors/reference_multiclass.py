"""``MulticlassReference``: a labelled multiclass period kept as compact state, and the
label-free metrics of multiclass windows against it (issue 14, points 2 and 4).

The state is one :class:`~streammetrics.metrics.multiclass_scores.MulticlassScores`
(``K * K`` score histograms ``H[t][c]`` and the arg-max confusion cells; bounded by its
binning, or exact), built from arrays or merged from saved states. From it:

* **per class score drift**: class ``c``'s column histogram ``sum_t H[t][c]`` is the
  reference of the window's column-``c`` scores; ``drift_ks``, ``drift_wasserstein`` (with
  their guaranteed ``_low``/``_high`` bounds on bins), ``drift_psi`` and ``drift_js`` on the
  reference's weighted deciles, exactly as the binary :class:`~streammetrics.monitors.reference.Reference`
  (see :mod:`streammetrics.kernels.drift`), in ``per_class[c]``; the top-level
  ``drift_ks``/``drift_wasserstein``/``drift_psi``/``drift_js`` are the largest over the
  classes (``_low``/``_high``: the largest low and the largest high, bounds of that maximum);
* **predicted-class drift**: ``drift_predicted_psi`` and ``drift_predicted_js``: PSI
  (natural log, empty shares 1e-4) and Jensen-Shannon distance (base 2,
  ``scipy.spatial.distance.jensenshannon(reference, window, base=2)``) of the arg-max class
  shares, one group per class (a categorical distribution needs no binning; no chi-square
  test: its p-value depends on the window's size, not on how far the shares moved);
* **estimated performance** (:mod:`streammetrics.kernels.cbpe_multiclass`, NannyML's
  multiclass CBPE): ``estimated_accuracy`` and ``estimated_macro_f1`` of score rows
  (:meth:`MulticlassReference.estimate` on arrays, or a mergeable
  :class:`MulticlassEstimate` of ``3K + 1`` sums fed row by row). A
  :class:`~streammetrics.monitors.multiclass.MulticlassMonitor` bound to the reference
  (``MulticlassMonitor(classes, reference=ref)``, or per key in a pipeline) keeps the same
  sums in its declared state, fed per prediction (labelled or not): the ``K`` sums
  ``tp`` and ``prob`` plus its own predicted-class weights and total weight, tagged with
  :attr:`MulticlassReference.fingerprint`; :meth:`MulticlassReference.metrics` reads them
  when the tag is the reference's and every prediction of the window was fed. Those sums
  are exact (contract section 1: a function of the multiset of predictions): each term
  ``w p_c`` is rounded once, as ``cal_c * (w / total)`` by :func:`estimate_terms` on the
  per-event path (rows buffered, :data:`~streammetrics.kernels.exact_sum.BUFFER` at a time)
  and the batch path alike, then summed exactly
  (:class:`~streammetrics.kernels.exact_sum.ExactSum`); a state writes their correctly
  rounded values plus, when some is not exact, the rest of their expansions
  (``estimate["residues"]``).

A window is a ``MulticlassMonitor`` (its label-free ``predicted_weights`` for the
predicted-class drift, its label-free per-class score histograms ``class_scores``, one per
score column over every prediction, for the per-class score drift) or a
``MulticlassScores`` (its labelled histograms: column ``c`` is ``sum_t H[t][c]``).

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> S = rng.dirichlet([1, 1, 1], 600)
>>> y = np.array([rng.choice(3, p=row) for row in S])
>>> ref = MulticlassReference.from_arrays(y, S, classes=[0, 1, 2], exact=True)
>>> est = ref.estimate(rng.dirichlet([4, 1, 1], 300))
>>> 0.4 < est["estimated_accuracy"] < 0.9
True
"""
from __future__ import annotations

import bisect
import hashlib
import json
import math
import warnings
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from streammetrics.core.accumulator import from_dict
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.kernels import cbpe, cbpe_multiclass, drift
from streammetrics.kernels.exact_sum import BUFFER, SMALL, ExactSum, add_rows, as_array, small_units
from streammetrics.kernels.levels import level_bounds
from streammetrics.metrics.multiclass_scores import MulticlassScores
from streammetrics.monitors.base import json_number
from streammetrics.monitors.reference import ReferenceLevels, distribution_of, merged_states, scores_of

__all__ = [
    "MULTICLASS_METRICS", "PER_CLASS_METRICS", "MulticlassEstimate", "MulticlassReference", "add_estimate_terms",
    "estimate_terms", "fold_estimate", "new_estimate", "multiclass_scores_of",
]

#: per-class keys added to ``per_class[c]`` of a snapshot
PER_CLASS_METRICS = (
    "drift_ks", "drift_ks_low", "drift_ks_high",
    "drift_wasserstein", "drift_wasserstein_low", "drift_wasserstein_high",
    "drift_psi", "drift_js",
)
#: top-level keys of :meth:`MulticlassReference.metrics`
MULTICLASS_METRICS = (
    *PER_CLASS_METRICS, "drift_predicted_psi", "drift_predicted_js",
    "estimated_accuracy", "estimated_macro_f1",
)


_bisect = bisect.bisect_right


def _knots(x: np.ndarray, y: np.ndarray) -> tuple:
    """Interpolation knots of one class's fit as Python floats, with np.interp's slopes
    ``(y[j+1] - y[j]) / (x[j+1] - x[j])`` (0 where two knots share an x: never used)."""
    xs, ys = x.tolist(), y.tolist()
    slopes = [(ys[j + 1] - ys[j]) / (xs[j + 1] - xs[j]) if xs[j + 1] != xs[j] else 0.0 for j in range(len(xs) - 1)]
    return xs, ys, slopes, xs[0], xs[-1], ys[0], ys[-1]


def multiclass_scores_of(obj: Any) -> MulticlassScores | None:
    return scores_of(obj, MulticlassScores)


def _predicted_shares(scores: MulticlassScores) -> np.ndarray:
    """Weight per arg-max class of a MulticlassScores (column sums of its cells)."""
    return np.asarray(scores._predicted_weights(), dtype=np.float64)


# ------------------------------------------------------------------ a monitor's estimate sums
# [fingerprint, rows fed, tp (K ExactSum), prob (K ExactSum), pending rows, second]: the pending
# rows are flat ``K`` calibrated values (not normalised), weight, arg-max class per row, folded by
# fold_estimate (at BUFFER rows, or before any read, merge, copy or encoding); ``second`` the
# ``3 K^2`` exact sums of the intervals (kernels.cbpe_multiclass.second_order_sums, flat: u, r, v
# row by row), None when unknown (a state written before they were kept)
#: up to this many classes the tp hits are summed as a zero-padded (n, K) array with the prob
#: terms (one exact pass); beyond, grouped by class (about ``n`` entries instead of ``n K``)
_FULL_HITS = 4
#: products of :func:`second_order_terms` built at once (rows x 3 K^2), at most
_SECOND_CHUNK = 1 << 18


def new_estimate(fingerprint: str, k: int) -> list:
    """Empty estimate sums of ``k`` classes tagged with a reference's fingerprint."""
    return [fingerprint, 0, [ExactSum() for _ in range(k)], [ExactSum() for _ in range(k)], [],
            [ExactSum() for _ in range(3 * k * k)]]


def second_order_terms(terms: np.ndarray, w: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """The ``(n, 3 K^2)`` products whose column sums are
    :func:`~streammetrics.kernels.cbpe_multiclass.second_order_sums` (flat ``u``, ``r``, ``v``):
    row ``i`` holds ``w t_y`` and ``t_pred t_y`` in its predicted class's block, ``t_y t_z``
    everywhere (each product rounded once: the same floats on every path)."""
    n, k = terms.shape
    rows = np.arange(n)
    out = np.zeros((n, 3, k, k))
    out[rows, 0, pred] = w[:, None] * terms
    out[rows, 1, pred] = terms[rows, pred][:, None] * terms
    out[:, 2] = terms[:, :, None] * terms[:, None, :]
    return out.reshape(n, 3 * k * k)


def estimate_terms(cal: np.ndarray, w: np.ndarray) -> np.ndarray:
    """The ``(n, K)`` terms ``w * p_c`` of rows of calibrated values ``cal`` (not normalised)
    and weights ``w``: ``cal_c * (w / total)`` with ``total = cal_0 + cal_1 + ...`` added left to
    right (a row whose values sum to 0 is uniform: ``cal_c = 1``, ``total = K``). Every path
    computes a term by these operations, so a term depends only on its event.

    >>> estimate_terms(np.array([[0.5, 0.25, 0.25], [0.0, 0.0, 0.0]]), np.array([2.0, 3.0])).tolist()
    [[1.0, 0.5, 0.5], [1.0, 1.0, 1.0]]
    """
    k = cal.shape[1]
    total = cal[:, 0].copy()
    for c in range(1, k):
        total += cal[:, c]
    zero = total == 0
    if zero.any():
        cal = cal.copy()
        cal[zero] = 1.0
        total[zero] = float(k)
    f = w / total
    return cal * f[:, None]


def add_estimate_terms(est: list, terms: np.ndarray, pred: np.ndarray, w: np.ndarray) -> None:
    """Add rows of :func:`estimate_terms` (arg-max classes ``pred``, weights ``w``) to the exact
    sums: ``tp[c]`` the term of class ``c`` of rows predicted ``c``, ``prob[c]`` every row's, and
    the :func:`second_order_terms` (when kept)."""
    n, k = terms.shape
    if not n:
        return
    if est[5] is not None:
        step = max(1, _SECOND_CHUNK // (3 * k * k))  # (products in bounded chunks)
        for i in range(0, n, step):
            _add_second(est[5], terms[i : i + step], w[i : i + step], pred[i : i + step])
    tp, prob = est[2], est[3]
    rows = np.arange(n)
    diag = terms[rows, pred]
    if n <= SMALL:  # plain Python ints: numpy's set-up costs more for a few rows
        groups: list[list[float]] = [[] for _ in range(k)]
        for p, x in zip(pred.tolist(), diag.tolist()):
            groups[p].append(x)
        for c, column in enumerate(terms.T.tolist()):
            prob[c].add_units(small_units(column))
            if groups[c]:
                tp[c].add_units(small_units(groups[c]))
        return
    if k <= _FULL_HITS:  # tp: each row's hit in its class's row of an (n, K) array, one pass with prob
        hits = np.zeros_like(terms)
        hits[rows, pred] = diag
        add_rows([*tp, *prob], [*hits.T, *terms.T])
        return
    add_rows(prob, list(terms.T))
    # tp: class c's hits in row c of a (K, largest class count) array, zero-padded
    order = np.argsort(pred, kind="stable")
    grouped = pred[order]
    counts = np.bincount(grouped, minlength=k)
    starts = np.cumsum(counts) - counts
    hits = np.zeros((k, int(counts.max())))
    hits[grouped, rows - starts[grouped]] = diag[order]
    add_rows(tp, list(hits))


def _add_second(sums: list[ExactSum], terms: np.ndarray, w: np.ndarray, pred: np.ndarray) -> None:
    """Add the :func:`second_order_terms` of rows to their ``3 K^2`` exact sums: a few rows as
    they are; more by predicted class (the ``u`` and ``r`` blocks of the rows of each) and ``v``
    by its upper triangle (``t_y t_z`` and ``t_z t_y`` are the same float), the same sums."""
    n, k = terms.shape
    if n <= SMALL:
        for total, column in zip(sums, second_order_terms(terms, w, pred).T.tolist()):
            total.add_units(small_units(column))
        return
    kk = k * k
    for c in range(k):
        rows = np.flatnonzero(pred == c)
        if len(rows):
            t = terms[rows]
            block = [*(w[rows][:, None] * t).T, *(t[:, c][:, None] * t).T]
            add_rows([*sums[c * k : c * k + k], *sums[kk + c * k : kk + c * k + k]], block)
    upper = [(y, x) for y in range(k) for x in range(y, k)]
    scratch = [ExactSum() for _ in upper]
    add_rows(scratch, [terms[:, y] * terms[:, x] for y, x in upper])
    for (y, x), part in zip(upper, scratch):
        sums[2 * kk + y * k + x].merge(part)
        if x != y:
            sums[2 * kk + x * k + y].merge(part)


def fold_estimate(est: list) -> list:
    """Add the pending rows of estimate sums exactly (in place) and return them."""
    pending = est[4]
    if pending:
        k = len(est[2])
        if len(pending) <= SMALL * (k + 2):
            _fold_small(est, pending, k)
        else:
            rows = as_array(pending).reshape(-1, k + 2)
            terms = estimate_terms(rows[:, :k], rows[:, k].copy())
            add_estimate_terms(est, terms, rows[:, k + 1].astype(np.intp), rows[:, k].copy())
        pending.clear()
    return est


def _fold_small(est: list, pending: list, k: int) -> None:
    """:func:`fold_estimate` of a few rows in plain Python (a small window's snapshot): the
    IEEE operations of :func:`estimate_terms` in its order, summed by ``small_units``."""
    tp_terms: list[list[float]] = [[] for _ in range(k)]
    prob_terms: list[list[float]] = [[] for _ in range(k)]
    second: list[list[float]] | None = None if est[5] is None else [[] for _ in range(3 * k * k)]
    step = k + 2
    for i in range(0, len(pending), step):
        cal = pending[i : i + k]
        total = cal[0]
        for c in cal[1:]:
            total += c
        if total == 0:
            cal, total = [1.0] * k, float(k)
        w = pending[i + k]
        f = w / total
        t = [cal[j] * f for j in range(k)]
        for j in range(k):
            prob_terms[j].append(t[j])
        pred = int(pending[i + k + 1])
        tp_terms[pred].append(t[pred])
        if second is not None:  # second_order_terms' products, the nonzero ones
            kk, base = k * k, pred * k
            for y in range(k):
                second[base + y].append(w * t[y])
                second[kk + base + y].append(t[pred] * t[y])
                for x in range(k):
                    second[2 * kk + y * k + x].append(t[y] * t[x])
    for sums, groups in ((est[2], tp_terms), (est[3], prob_terms), (est[5] or [], second or [])):
        for s, group in zip(sums, groups):
            if group:
                s.add_units(small_units(group))


class MulticlassEstimate:
    """Mergeable CBPE sums of a window's score rows against a :class:`MulticlassReference`
    (``3K + 1`` numbers; see :mod:`streammetrics.kernels.cbpe_multiclass`), exact: the terms
    of :func:`estimate_terms` and the weights summed exactly, so any split merged in any order
    gives the same sums."""

    def __init__(self, reference: MulticlassReference) -> None:
        self.reference = reference
        k = len(reference.classes)
        self._sums = new_estimate(reference.fingerprint, k)
        self._predicted = [ExactSum() for _ in range(k)]
        self._total = ExactSum()

    @property
    def tp(self) -> np.ndarray:
        """Per class the (correctly rounded) expected weight of its true positives."""
        return np.array([s.value for s in self._sums[2]])

    @property
    def prob(self) -> np.ndarray:
        """Per class the summed calibrated probability of every row (weighted)."""
        return np.array([s.value for s in self._sums[3]])

    @property
    def predicted(self) -> np.ndarray:
        """Per class the weight of the rows predicted (arg-max) that class."""
        return np.array([s.value for s in self._predicted])

    @property
    def total(self) -> float:
        return self._total.value

    def update_many(self, score_matrix: Any, sample_weight: Any = None) -> MulticlassEstimate:
        """Add score rows (validated as ``MulticlassScores.update_many``; nothing changes on error)."""
        s = self.reference.scores._cols.matrix(score_matrix, "score_matrix")
        w = np.ones(len(s))
        if sample_weight is not None:
            w = np.asarray(sample_weight, dtype=np.float64)
            if w.shape != (len(s),) or not np.isfinite(w).all() or (len(w) and w.min() < 0):
                raise ValueError("sample_weight must be finite, >= 0 and one per row")
        if not len(s):
            return self
        pred = s.argmax(axis=1)
        add_estimate_terms(self._sums, estimate_terms(self.reference.calibrated_matrix(s), w), pred, w)
        for c, total in enumerate(self._predicted):
            total.add_array(w[pred == c])
        self._total.add_array(w)
        return self

    def merge(self, other: MulticlassEstimate) -> MulticlassEstimate:
        if other.reference is not self.reference:
            raise ValueError("estimates against different references cannot be merged")
        for mine, theirs in zip([*self._sums[2], *self._sums[3], *self._sums[5], *self._predicted, self._total],
                                [*other._sums[2], *other._sums[3], *other._sums[5], *other._predicted, other._total]):
            mine.merge(theirs)
        return self

    def intervals(self, confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """``{"estimated_accuracy", "estimated_macro_f1"}`` intervals of the realised metrics
        (:meth:`MulticlassReference.estimate_intervals`)."""
        return self.reference.estimate_intervals(self.tp, self.predicted, self.prob, self.total, self._sums[5],
                                                 confidence)

    def metrics(self) -> dict[str, float]:
        """``{"estimated_accuracy", "estimated_macro_f1"}`` (nan with a warning when empty)."""
        m = cbpe_multiclass.estimated_metrics(self.tp, self.predicted, self.prob, self.total)
        return {"estimated_accuracy": m["accuracy"], "estimated_macro_f1": m["macro_f1"]}


class MulticlassReference:
    """Labelled multiclass reference state and the label-free metrics of windows against it
    (see the module docstring)."""

    def __init__(self, scores: MulticlassScores, *, psi_groups: int = 10) -> None:
        if not isinstance(scores, MulticlassScores):
            raise TypeError(f"scores must be a MulticlassScores, got {type(scores).__name__}")
        if not scores.total_weight > 0:
            raise ValueError("the reference holds no event with a non-zero weight")
        if type(psi_groups) is not int or psi_groups < 1:
            raise ValueError(f"psi_groups must be a positive int, got {psi_groups!r}")
        self.scores = scores.copy()
        self.psi_groups = psi_groups
        self.classes = list(self.scores.classes)
        binning = self.scores.binning
        self._levels: list[ReferenceLevels] = []
        self.fits: list[tuple[np.ndarray, np.ndarray]] = []
        for c, (keys, table) in enumerate(self.scores._columns()):
            pos = table[c]
            neg = table.sum(axis=0) - pos
            self._levels.append(ReferenceLevels((keys, table.sum(axis=0), binning)))
            if binning.exact:
                fit = cbpe.isotonic_fit(keys.astype(np.float64), neg, pos)
            else:
                fit = cbpe.isotonic_fit_bins(*level_bounds(binning, keys), neg, pos)
            self.fits.append(fit)
        self._predicted = _predicted_shares(self.scores)
        # per class (x knots, y knots, slopes, first x, last x, first y, last y) as Python
        # floats: the per-event calibration (np.interp's arithmetic, without numpy calls)
        self._knots = [_knots(x, y) for x, y in self.fits]
        # the same knots and slopes as arrays: calibrated_matrix, the batch path
        self._knot_arrays = [(np.array(k[0], dtype=np.float64), np.array(k[1], dtype=np.float64),
                              np.array(k[2], dtype=np.float64)) for k in self._knots]
        text = json.dumps(self.scores.to_dict(), sort_keys=True, separators=(",", ":"))
        #: identifies the calibration that monitors' estimate sums were fed with (16 hex digits
        #: of the SHA-256 of the reference's state): sums of another reference are not read
        self.fingerprint = hashlib.sha256(text.encode()).hexdigest()[:16]

    # ------------------------------------------------------------------ building
    @classmethod
    def from_arrays(
        cls, y_true: Any, score_matrix: Any, sample_weight: Any = None, *, classes: Sequence[Hashable],
        exact: bool = False, bins: int = 64, **options: Any,
    ) -> MulticlassReference:
        """Reference of labelled rows (validated as ``MulticlassScores.update_many``)."""
        acc = MulticlassScores(classes, bins=bins, exact=exact)
        acc.update_many(y_true, score_matrix, sample_weight)
        return cls(acc, **options)

    @classmethod
    def from_states(cls, states: Iterable[Any], **options: Any) -> MulticlassReference:
        """Reference of merged ``MulticlassScores`` / ``MulticlassMonitor`` states (or dicts)."""
        return cls(merged_states(states, multiclass_scores_of, "MulticlassScores"), **options)

    def to_dict(self) -> dict[str, Any]:
        return {"type": "MulticlassReference", "version": 1, "config": {"psi_groups": self.psi_groups},
                "scores": self.scores.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MulticlassReference:
        if not isinstance(data, Mapping) or data.get("type") != "MulticlassReference" or data.get("version") != 1:
            raise ValueError("not a version-1 MulticlassReference dict")
        config = data.get("config")
        if not isinstance(config, Mapping) or set(config) != {"psi_groups"}:
            raise ValueError(f"MulticlassReference config must hold psi_groups, got {config!r}")
        return cls(MulticlassScores.from_dict(data["scores"]), **config)

    @property
    def count(self) -> int:
        return self.scores.count

    # ------------------------------------------------------------------ metrics
    def calibrated(self, score_matrix: np.ndarray) -> np.ndarray:
        """Normalised one-vs-rest calibrated probabilities of score rows."""
        return cbpe_multiclass.calibrated_rows(score_matrix, self.fits)

    def _calibrate_row(self, row: Sequence[float]) -> list[float]:
        """The one-vs-rest calibrated values of one row, not normalised (np.interp's arithmetic)."""
        cal = []
        for v, (xs, ys, slopes, lo, hi, ylo, yhi) in zip(row, self._knots):
            if v <= lo:
                cal.append(ylo)
            elif v >= hi:
                cal.append(yhi)
            else:  # lo <= xs[j] <= v < xs[j + 1]: np.interp's slope * (x - xp[j]) + fp[j]
                j = _bisect(xs, v) - 1
                cal.append(slopes[j] * (v - xs[j]) + ys[j])
        return cal

    def calibrated_row(self, row: Sequence[float]) -> list[float]:
        """:meth:`calibrated` of one score row in pure Python: ``np.interp`` per class,
        clipped to the fitted range, then normalised (uniform when the calibrated values sum
        to 0)."""
        cal = self._calibrate_row(row)
        total = sum(cal)
        if total == 0:
            return [1.0 / len(cal)] * len(cal)
        return [c / total for c in cal]

    def calibrated_matrix(self, score_matrix: np.ndarray) -> np.ndarray:
        """The one-vs-rest calibrated values of score rows, not normalised, by the arithmetic
        of :meth:`_calibrate_row` (np.interp's ``slope * (x - xp[j]) + fp[j]``, ``j`` by
        ``searchsorted``), so the batch and per-event estimate terms are the same floats."""
        s = np.asarray(score_matrix, dtype=np.float64)
        out = np.empty_like(s)
        for c, ((xs, ys, slopes), knots) in enumerate(zip(self._knot_arrays, self._knots)):
            v = s[:, c]
            lo, hi, ylo, yhi = knots[3:]
            if len(slopes):
                j = np.clip(np.searchsorted(xs, v, side="right") - 1, 0, len(slopes) - 1)
                mid = slopes[j] * (v - xs[j]) + ys[j]
            else:
                mid = np.full(len(v), ylo)
            out[:, c] = np.where(v <= lo, ylo, np.where(v >= hi, yhi, mid))
        return out

    def feed_row(self, row: Sequence[float], weight: float, pred: int, estimate: list) -> None:
        """Add one score row (arg-max ``pred``) of weight ``weight`` to estimate sums (see
        :func:`new_estimate`): the per-event path buffers its calibrated values, weight and
        class; the terms and their exact sums come at the fold (:func:`fold_estimate`)."""
        pending = estimate[4]
        pending += self._calibrate_row(row)
        pending.append(weight)
        pending.append(pred)
        if len(pending) >= BUFFER * (len(row) + 2):
            fold_estimate(estimate)

    def estimator(self) -> MulticlassEstimate:
        """An empty mergeable estimate to feed a window's rows into."""
        return MulticlassEstimate(self)

    def estimate(self, score_matrix: Any, sample_weight: Any = None) -> dict[str, float]:
        """``estimated_accuracy`` and ``estimated_macro_f1`` of score rows (labels not used)."""
        return self.estimator().update_many(score_matrix, sample_weight).metrics()

    def _window_columns(self, window: Any) -> list[Any] | None:
        """The window's per-class score histograms ``(keys, weights, binning)``: a monitor's
        label-free ``class_scores`` (every prediction), else labelled histograms when they
        hold every prediction (a ``MulticlassScores``, or a monitor whose predictions are all
        labelled: state migrated from version 2); None otherwise."""
        class_scores = getattr(window, "_class_scores", None)
        if class_scores is not None:
            return [distribution_of(d) for d in class_scores]
        scores = multiclass_scores_of(window)
        if scores is None or scores.total_weight <= 0:
            return None
        if hasattr(window, "_pcount") and window.labeled != window.count:
            return None  # labelled histograms miss the unlabelled predictions
        binning = scores.binning
        return [(keys, table.sum(axis=0), binning) for keys, table in scores._columns()]

    def drift(self, window: Any) -> dict[str, Any]:
        """Per-class score drift (``per_class``: class -> the ``drift_*`` of its column, from
        every prediction of a monitor; empty when the window has no prediction or no such
        histograms) and the predicted-class drift."""
        if isinstance(window, Mapping):
            window = from_dict(window)
        scores = multiclass_scores_of(window)
        if scores is not None and scores.classes != self.classes:
            raise ValueError(f"window classes {scores.classes!r} != reference classes {self.classes!r}")
        pweights = getattr(window, "predicted_weights", None)  # a MulticlassMonitor's (floats)
        predicted = np.asarray(pweights, dtype=np.float64) if pweights is not None else (
            _predicted_shares(scores) if scores is not None else np.zeros(len(self.classes)))
        out: dict[str, Any] = {
            "drift_predicted_psi": drift.psi(predicted, self._predicted),
            "drift_predicted_js": drift.js(predicted, self._predicted),
        }
        per_class: dict[str, dict[str, float]] = {}
        columns = self._window_columns(window)
        if columns is not None and any(float(h[1].sum()) > 0 for h in columns):
            for c, hist in enumerate(columns):
                per_class[str(self.classes[c])] = self._levels[c].drift(hist, self.psi_groups)
        for name in PER_CLASS_METRICS:
            values = [row[name] for row in per_class.values()]
            out[name] = max(values) if values and not any(math.isnan(v) for v in values) else math.nan
        out["per_class"] = per_class
        return out

    def monitor_estimate(self, monitor: Any) -> dict[str, float] | None:
        """``estimated_accuracy`` / ``estimated_macro_f1`` from a ``MulticlassMonitor``'s
        estimate sums; None unless they were fed with this reference (same
        :attr:`fingerprint`) for every prediction the monitor counts."""
        est = getattr(monitor, "_estimate", None)
        if est is None or est[0] != self.fingerprint or est[1] != monitor.count:
            return None
        fold_estimate(est)
        predicted = np.asarray(monitor.predicted_weights, dtype=np.float64)
        tp = np.array([s.value for s in est[2]])
        prob = np.array([s.value for s in est[3]])
        m = cbpe_multiclass.estimated_metrics(tp, predicted, prob, monitor.total_weight)
        return {"estimated_accuracy": m["accuracy"], "estimated_macro_f1": m["macro_f1"]}

    def estimate_intervals(self, tp: Any, predicted: Any, prob: Any, total: float, second: list | None,
                           confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """``{"estimated_accuracy", "estimated_macro_f1"}`` intervals of where a window's realised
        metrics will land (:func:`~streammetrics.kernels.cbpe_multiclass.estimated_intervals`) from
        its estimate sums and their ``second`` (the ``3 K^2`` :class:`ExactSum` of
        :func:`second_order_terms`; None, e.g. a state written before they were kept: no interval)."""
        from streammetrics.kernels.intervals import check_confidence, z_value

        z = z_value(check_confidence(confidence))
        out: dict[str, tuple[float, float] | None] = {"estimated_accuracy": None, "estimated_macro_f1": None}
        if second is None:
            return out
        k = len(self.classes)
        flat = np.array([x.value for x in second], dtype=np.float64).reshape(3, k, k)
        got = cbpe_multiclass.estimated_intervals(tp, predicted, prob, total, flat[0], flat[1], flat[2], z,
                                                  self._reference_events())
        return {"estimated_accuracy": got["accuracy"], "estimated_macro_f1": got["macro_f1"]}

    def _reference_events(self) -> float:
        """The reference's effective size: its count for unit weights, else Kish's
        ``(sum w)^2 / sum w^2`` from its confusion cells' squared weights (its count when they
        are not kept)."""
        cm = self.scores.confusion()
        squares = None if cm.unit_weights else cm.squares()
        if not squares:
            return float(self.scores.count)
        total = math.fsum(squares.values())
        return self.scores.total_weight ** 2 / total if total > 0 else float(self.scores.count)

    def monitor_intervals(self, monitor: Any, confidence: float = 0.95) -> dict[str, tuple[float, float] | None]:
        """:meth:`estimate_intervals` from a ``MulticlassMonitor``'s estimate sums (all None unless
        they were fed with this reference for every prediction, as :meth:`monitor_estimate`)."""
        est = getattr(monitor, "_estimate", None)
        if est is None or est[0] != self.fingerprint or est[1] != monitor.count:
            return {"estimated_accuracy": None, "estimated_macro_f1": None}
        fold_estimate(est)
        tp = np.array([s.value for s in est[2]])
        prob = np.array([s.value for s in est[3]])
        return self.estimate_intervals(tp, np.asarray(monitor.predicted_weights, dtype=np.float64), prob,
                                       monitor.total_weight, est[5], confidence)

    def metrics(self, window: Any, estimate: MulticlassEstimate | None = None) -> dict[str, Any]:
        """Every key of :data:`MULTICLASS_METRICS` (JSON-safe, None where undefined) and
        ``per_class`` (class -> :data:`PER_CLASS_METRICS`); the estimates come from
        ``estimate``, else from a monitor's estimate sums (:meth:`monitor_estimate`), else
        null (a ``MulticlassScores`` state holds no joint calibrated rows)."""
        if isinstance(window, Mapping):
            window = from_dict(window)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UndefinedMetricWarning)
            out = self.drift(window)
            est = estimate.metrics() if estimate is not None else self.monitor_estimate(window)
            if est is None:
                est = {"estimated_accuracy": math.nan, "estimated_macro_f1": math.nan}
        out.update(est)
        result: dict[str, Any] = {k: json_number(float(out[k])) for k in MULTICLASS_METRICS}
        result["per_class"] = {c: {k: json_number(float(v)) for k, v in row.items()}
                               for c, row in out["per_class"].items()}
        return result

    def __repr__(self) -> str:
        return f"MulticlassReference(classes={self.classes!r}, count={self.count}, psi_groups={self.psi_groups})"
