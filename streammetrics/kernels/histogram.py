"""Weighted score histograms: the mergeable state behind every ranking metric.

A :class:`ScoreHistogram` holds, for one group of events (e.g. the negatives of a binary
task), the summed weight of their scores per key of a
:class:`~streammetrics.kernels.binning.Binning` (keys without weight are not stored:
scikit-learn ignores zero-weight events in ranking metrics). :func:`aligned` puts histograms
on their common keys in ascending score order, the input of :mod:`streammetrics.kernels.ranking`.

Memory is bounded by coarsening (:func:`collapse`, :func:`fit`): on a
:class:`~streammetrics.kernels.binning.LogGridBinning`, to the nested grid with half as many
bins per octave while the histograms hold more than ``max_bins`` keys. It coarsens exactly
when the events seen need it, so the result does not depend on how a stream was split,
batched or merged.

Weights are floats while every weight added was whole, else Python ints of units of
``2**-1074`` (*units mode*, :mod:`streammetrics.kernels.exact_weights`); every function here
works in both modes and :func:`aligned` always returns correctly rounded floats.
"""
from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from streammetrics.core.state import describe
from streammetrics.kernels.binning import Binning, LogGridBinning
from streammetrics.kernels.exact_weights import (
    UNIT,
    decode_residues,
    encode_residues,
    grouped_units,
    units_of,
    value_of,
)
from streammetrics.kernels.histogram_json import SMALL_KEYS, small_histograms_to_json

__all__ = [
    "ScoreHistogram",
    "aligned",
    "levels_of_table",
    "summed",
    "add_grouped",
    "aggregate",
    "coarsen_table",
    "insert_table",
    "coarsen_all",
    "collapse",
    "bound",
    "merge_into",
    "table_to_grid",
    "to_grid",
    "histograms_to_json",
    "histograms_from_json",
    "coarser_of",
    "flatten",
    "rebuild",
    "regrid_flat",
    "fit_flat",
    "fit",
    "add_flat",
    "units_mode",
    "to_units",
    "weight_array",
]

#: above this, summed weights could overflow float64 in derived sums; updates refuse it
MAX_TOTAL_WEIGHT = 1e300


class ScoreHistogram:
    """Summed weight per score key of one group of events (see the module docstring).

    A histogram filled by one batch (``insert_table(..., arrays=True)`` into an empty one: a
    window's events applied at its close) keeps the batch's arrays until something reads
    :attr:`weights`, which builds the dict then (:attr:`pending` until that): its levels, length,
    copy and JSON are read from the arrays, so a window written once never builds the dict."""

    __slots__ = ("_pending", "_weights", "binning")

    def __init__(self, binning: Binning) -> None:
        self.binning = binning
        self._weights: dict[Any, float] = {}
        #: ``(keys, float weights)`` (read-only arrays, no zero weight) held instead of the dict
        #: (empty meanwhile), or None
        self._pending: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def weights(self) -> dict[Any, float]:
        """key -> summed weight (> 0); keys are ints (log grid) or float scores (exact)."""
        if self._pending is not None:
            keys, values = self._pending
            self._pending = None
            self._weights.update(zip(keys.tolist(), values.tolist()))
        return self._weights

    @weights.setter
    def weights(self, value: dict[Any, float]) -> None:
        self._weights, self._pending = value, None

    def hold(self, keys: np.ndarray, values: np.ndarray) -> None:
        """Keep ``(keys, float weights)`` (distinct keys in ascending order, no zero weight; made
        read-only here) as the contents of this empty histogram (see the class docstring)."""
        keys.flags.writeable = values.flags.writeable = False
        self._pending = (keys, values)

    @property
    def pending(self) -> bool:
        """Whether the histogram holds arrays not yet in its dict (see the class docstring)."""
        return self._pending is not None

    def merge(self, other: "ScoreHistogram") -> None:
        """Add the weights of ``other`` (same binning) to ``self``."""
        if other.binning != self.binning:
            raise ValueError(f"cannot merge histograms over {other.binning!r} and {self.binning!r}")
        w = self.weights
        for k, v in other.weights.items():
            w[k] = w.get(k, 0) + v

    def merge_weights(self, weights: Mapping[Any, float]) -> None:
        """Add ``key -> weight`` pairs (keys of this histogram's binning)."""
        w = self.weights
        get = w.get
        for k, v in weights.items():
            w[k] = get(k, 0) + v

    def copy(self) -> "ScoreHistogram":
        new = ScoreHistogram(self.binning)
        if self._pending is not None:  # (read-only arrays: shared)
            new._pending = self._pending
        else:
            new._weights = dict(self._weights)
        return new

    def total(self) -> float:
        """Summed weight of all keys (correctly rounded in units mode)."""
        t = sum(self.weights.values())
        return t if isinstance(t, float) else value_of(int(t))

    def __len__(self) -> int:
        return len(self._weights) if self._pending is None else len(self._pending[0])

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ScoreHistogram):
            return NotImplemented
        return self.binning == other.binning and self.weights == other.weights

    __hash__ = None  # type: ignore[assignment]  # mutable: not hashable

    def __repr__(self) -> str:
        return f"ScoreHistogram({self.binning!r}, {len(self)} keys, weight={self.total():g})"


def units_mode(hists: Iterable[ScoreHistogram]) -> bool:
    """True if the histograms hold units (ints) rather than floats (see the module docstring)."""
    for h in hists:
        if h._pending is not None:  # (arrays of floats, not empty)
            return False
        for v in h._weights.values():
            return v.__class__ is int
    return False


def to_units(hists: Iterable[ScoreHistogram]) -> None:
    """Convert float weights to exact units, in place (the dicts stay the same objects)."""
    for h in hists:
        w = h.weights
        for k, v in w.items():
            if v.__class__ is not int:
                w[k] = units_of(v)


def weight_array(values: Iterable[Any], n: int, units: bool) -> np.ndarray:
    """Weights as float64, or (``units``) as an object array of exact ints."""
    return np.fromiter(values, dtype=object if units else np.float64, count=n)


def _floats(values: Iterable[Any], n: int) -> np.ndarray:
    """Float64 weights of one histogram's values (units correctly rounded)."""
    vals = list(values)
    if vals and vals[0].__class__ is int:
        return np.array([value_of(v) for v in vals], dtype=np.float64)
    return np.fromiter(vals, dtype=np.float64, count=n)


def aligned(*hists: ScoreHistogram) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, weights)``: the union of the histograms' keys in ascending score order and
    a ``(len(hists), len(keys))`` float64 array of their weights (0 where absent; units
    correctly rounded)."""
    binning = hists[0].binning
    if any(h.binning != binning for h in hists):
        raise ValueError("histograms over different binnings cannot be aligned")
    dtype = np.float64 if binning.exact else np.int64
    parts = [_contents(h, dtype) for h in hists]
    keys = np.unique(parts[0][0] if len(parts) == 1 else np.concatenate([k for k, _ in parts]))
    out = np.zeros((len(hists), len(keys)), dtype=np.float64)
    for row, (k, v) in zip(out, parts):
        if len(k):
            row[np.searchsorted(keys, k)] = v
    return keys, out


def _contents(h: ScoreHistogram, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, float64 weights)`` of one histogram, in its order (units correctly rounded)."""
    if h._pending is not None:
        keys, values = h._pending
        return keys.astype(dtype, copy=False), values
    w = h._weights
    return np.fromiter(w.keys(), dtype=dtype, count=len(w)), _floats(w.values(), len(w))


def levels_of_table(keys: np.ndarray, table: np.ndarray, sizes: Sequence[int]) -> tuple[np.ndarray, np.ndarray] | None:
    """:func:`aligned` of histograms that held nothing before :func:`insert_table` of ``(keys,
    table)`` and hold ``sizes`` keys now: the table itself, transposed (read-only arrays), when it
    is a float table whose non-zero cells are exactly those keys (the histograms hold its cells
    and nothing else); None otherwise (units, or the histograms changed since)."""
    if table.dtype != np.float64 or table.shape[1] != len(sizes):
        return None
    weights = np.ascontiguousarray(table.T)
    if np.count_nonzero(weights, axis=1).tolist() != list(sizes):
        return None
    keys = keys.astype(np.float64 if keys.dtype.kind == "f" else np.int64, copy=True)  # (aligned's dtypes)
    keys.flags.writeable = weights.flags.writeable = False
    return keys, weights


def summed(hists: Iterable[ScoreHistogram], binning: Binning) -> ScoreHistogram:
    """A new histogram holding the sum of ``hists`` (e.g. all classes but one, for OvR)."""
    out = ScoreHistogram(binning)
    for h in hists:
        out.merge(h)
    return out


def aggregate(
    keys: np.ndarray, groups: np.ndarray | None, n_groups: int, weights: np.ndarray | None, exact: bool = False
) -> tuple[np.ndarray, np.ndarray]:
    """``(keys, table)``: the distinct keys of a batch (ascending) and a
    ``(len(keys), n_groups)`` table of the summed weight of each (key, group), rows with
    no weight dropped. One ``np.bincount`` over the key range, or a sort when the range
    is much wider than the batch (and for the float keys of an exact binning).
    ``exact``: the table is an object array of exact sums in units (units mode)."""
    n = len(keys)
    if n == 0:
        return keys[:0], np.zeros((0, n_groups), dtype=object if exact else np.float64)
    if exact or keys.dtype.kind == "f":  # exact binning (or sums): distinct keys by sorting
        uniq, index = np.unique(keys, return_inverse=True)
        if exact:
            return _tabulate_units(uniq, index.reshape(-1), groups, n_groups, weights)
        return _tabulate(uniq, index.reshape(-1), groups, n_groups, weights, grouped=False)
    lo, hi = int(keys.min()), int(keys.max())
    span = hi - lo + 1
    if span <= max(n, 1 << 16):  # (a table of at most n_groups cells per event)
        index = _chunked_index(keys, lo, None, groups, n_groups)
        return _tabulate(np.arange(lo, hi + 1), index, groups, n_groups, weights)
    # compress the empty gaps of the key range (keys of scores < 0, in (0, 1) and > 1 lie
    # far apart): index events within the occupied blocks of 1024 consecutive keys
    occupied = np.zeros((span >> 10) + 1, dtype=bool)
    for start in range(0, n, _CHUNK):
        occupied[(keys[start : start + _CHUNK] - lo) >> 10] = True
    blocks = np.flatnonzero(occupied)
    if len(blocks) << 10 <= max(4 * n, 1 << 16):
        rank = np.zeros(len(occupied), dtype=np.int64)
        rank[blocks] = np.arange(len(blocks)) << 10
        index = _chunked_index(keys, lo, rank, groups, n_groups)
        row_keys = ((blocks[:, None] << 10) + np.arange(1024)).reshape(-1) + lo
        return _tabulate(row_keys, index, groups, n_groups, weights)
    uniq, index = np.unique(keys, return_inverse=True)  # few keys spread wide: sort
    return _tabulate(uniq, index.reshape(-1), groups, n_groups, weights, grouped=False)


_CHUNK = 1 << 16  # element-wise work in cache-sized blocks


def _chunked_index(
    keys: np.ndarray, lo: int, rank: np.ndarray | None, groups: np.ndarray | None, n_groups: int
) -> np.ndarray:
    """``(row of key) * n_groups + group`` per event, row = ``key - lo`` or, with ``rank``,
    the key's position among the occupied blocks."""
    out = np.empty(len(keys), dtype=np.int64)
    for start in range(0, len(keys), _CHUNK):
        o = out[start : start + _CHUNK]
        np.subtract(keys[start : start + _CHUNK], lo, out=o)
        if rank is not None:
            blocks = o >> 10
            o &= 1023
            o |= rank[blocks]
        if groups is not None and n_groups > 1:
            o *= n_groups
            np.add(o, groups[start : start + _CHUNK], out=o, casting="unsafe")
    return out


def _tabulate(
    row_keys: np.ndarray,
    index: np.ndarray,
    groups: np.ndarray | None,
    n_groups: int,
    weights: np.ndarray | None,
    grouped: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """bincount of events by (row, group) (``grouped``: index already holds the group);
    rows with no weight dropped."""
    if not grouped and groups is not None and n_groups > 1:
        index = index * n_groups + groups
    table = np.bincount(index, weights=weights, minlength=len(row_keys) * n_groups)
    table = table.reshape(-1, n_groups)
    if n_groups <= 8:  # (column by column: ~10x faster than any(axis=1) over a short axis)
        used = table[:, 0] != 0
        for j in range(1, n_groups):
            used |= table[:, j] != 0
    else:
        used = table.any(axis=1)
    rows = np.flatnonzero(used)
    return row_keys[rows], table[rows].astype(np.float64)


def _tabulate_units(
    row_keys: np.ndarray, index: np.ndarray, groups: np.ndarray | None, n_groups: int, weights: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_tabulate` with exact sums (units, an object table): :func:`grouped_units`
    (unit weights: counts times :data:`UNIT`); rows with no weight dropped."""
    if groups is not None and n_groups > 1:
        index = index * n_groups + groups
    if weights is None:
        codes, counts = np.unique(index, return_counts=True)
        sums = [c * UNIT for c in counts.tolist()]
    else:
        codes, sums = grouped_units(index, weights)
        keep = [i for i, u in enumerate(sums) if u]
        codes, sums = codes[keep], [sums[i] for i in keep]
    rows, at = np.unique(codes // n_groups, return_inverse=True)
    table = np.zeros((len(rows), n_groups), dtype=object)
    cells = np.empty(len(sums), dtype=object)
    cells[:] = sums
    table[at.reshape(-1), codes % n_groups] = cells
    return row_keys[rows], table


def coarsen_table(
    binning: LogGridBinning, keys: np.ndarray, table: np.ndarray
) -> tuple[LogGridBinning, np.ndarray, np.ndarray]:
    """The table of :func:`aggregate` on ``binning.coarser()`` (adjacent bins summed)."""
    coarse = binning.coarsen_keys(keys)
    if not len(coarse):
        return binning.coarser(), coarse, table
    starts = np.flatnonzero(np.concatenate(([True], coarse[1:] != coarse[:-1])))
    return binning.coarser(), coarse[starts], np.add.reduceat(table, starts, axis=0)


def insert_table(hists: Sequence[ScoreHistogram], keys: np.ndarray, table: np.ndarray, arrays: bool = False) -> None:
    """Add an :func:`aggregate` table to the histograms (column ``j`` to ``hists[j]``).
    ``arrays``: an empty histogram keeps its column as arrays (float tables; see
    :class:`ScoreHistogram`): for an owner whose per-event paths do not hold the dicts meanwhile."""
    arrays = arrays and table.dtype == np.float64
    for j, h in enumerate(hists):
        col = table[:, j]
        nz = np.flatnonzero(col)
        if not len(nz):
            continue
        if arrays and h._pending is None and not h._weights:
            h.hold(keys[nz], col[nz])
            continue
        w = h.weights
        if not w:  # (a window's first batch: the keys are distinct, nothing to add to)
            w.update(zip(keys[nz].tolist(), col[nz].tolist()))
            continue
        get = w.get
        for k, v in zip(keys[nz].tolist(), col[nz].tolist()):
            w[k] = get(k, 0) + v


def add_grouped(
    hists: Sequence[ScoreHistogram],
    keys: np.ndarray,
    groups: np.ndarray | None,
    weights: np.ndarray | None,
    exact: bool = False,
) -> None:
    """Add a batch of keyed events to ``hists[groups[i]]`` (all to ``hists[0]`` if ``groups``
    is None): :func:`aggregate` then one dict update per non-empty (key, group). Inputs
    must be validated: this cannot fail half-way. ``exact``: histograms in units mode."""
    insert_table(hists, *aggregate(keys, groups, len(hists), weights, exact))


def coarsen_all(hists: Sequence[ScoreHistogram]) -> LogGridBinning:
    """Move every histogram (all on one LogGridBinning) to the coarser grid; return it."""
    binning = hists[0].binning
    assert isinstance(binning, LogGridBinning)
    return _regrid(hists, np.int64, lambda keys, table: coarsen_table(binning, keys, table), binning.coarser())


def _regrid(hists: Sequence[ScoreHistogram], dtype: Any, move: Any, binning: LogGridBinning) -> LogGridBinning:
    """Each histogram's table (keys ascending, as ``dtype``) through ``move`` onto ``binning``."""
    for h in hists:
        if h.weights:
            keys = np.fromiter(h.weights.keys(), dtype=dtype, count=len(h.weights))
            vals = weight_array(h.weights.values(), len(h.weights), units_mode([h]))
            order = np.argsort(keys)
            _, k, v = move(keys[order], vals[order, None])
            h.weights = dict(zip(k.tolist(), v[:, 0].tolist()))
        h.binning = binning
    return binning


def table_to_grid(
    grid: LogGridBinning, keys: np.ndarray, table: np.ndarray
) -> tuple[LogGridBinning, np.ndarray, np.ndarray]:
    """An :func:`aggregate` table of exact scores (ascending ``keys``) on ``grid``: the rows
    of scores that share a grid key summed (the key is monotone, so they are adjacent)."""
    g = grid.keys(np.asarray(keys, dtype=np.float64))
    if not len(g):
        return grid, g, table
    starts = np.flatnonzero(np.concatenate(([True], g[1:] != g[:-1])))
    return grid, g[starts], np.add.reduceat(table, starts, axis=0)


def to_grid(hists: Sequence[ScoreHistogram], grid: LogGridBinning) -> LogGridBinning:
    """Move histograms of exact scores onto ``grid`` (in place); return it. Used by
    accumulators that are exact while their scores fit ``max_bins`` (see :func:`collapse`)."""
    return _regrid(hists, np.float64, lambda keys, table: table_to_grid(grid, keys, table), grid)


def bound(
    binning: Binning, hists: Sequence[ScoreHistogram], finest: int | None, max_bins: int | None
) -> Binning:
    """Exact while ``hists`` (on ``binning``) hold at most ``max_bins`` keys in all, else the
    log grid at ``finest`` bins per octave, coarsened by :func:`collapse`; return the binning.
    A function of the events only (distinct keys grow with the events; the grids nest), so
    accumulators built on any split of a stream and merged get the state of the whole.
    ``finest`` or ``max_bins`` None: unbounded (``exact=True`` accumulators)."""
    if max_bins is None or finest is None:
        return binning
    if binning.exact and sum(len(h) for h in hists) > max_bins:
        binning = to_grid(hists, LogGridBinning(finest))
    return collapse(hists, max_bins)


def merge_into(binning: Binning, hists: Sequence[ScoreHistogram], their_binning: Binning,
               theirs: Sequence[ScoreHistogram], units: bool, finest: int | None, max_bins: int | None) -> Binning:
    """Add ``theirs`` (on ``their_binning``; left unchanged) to ``hists`` (on ``binning``; in units
    mode if ``units``), both on the coarser of the two grids (an exact side moves to the finest
    grid if the other is on a grid), then :func:`bound`; return the binning in force."""
    convert = units and not units_mode(theirs)
    if convert or not (binning.exact and their_binning.exact):  # theirs change: copies
        theirs = [h.copy() for h in theirs]
    if convert:
        to_units(theirs)
    if binning.exact and not their_binning.exact:
        assert finest is not None  # exact=True accumulators never meet a grid
        binning = to_grid(hists, LogGridBinning(finest))
    if isinstance(binning, LogGridBinning):
        if their_binning.exact:  # straight to this grid: nested grids of ceiling keys, so the same
            to_grid(theirs, binning)  # keys as the finest grid coarsened (LogGridBinning.coarsen_keys)
        while theirs[0].binning.bins > binning.bins:  # type: ignore[attr-defined]  # a log grid now
            coarsen_all(theirs)
        while binning.bins > theirs[0].binning.bins:  # type: ignore[attr-defined]
            binning = coarsen_all(hists)
    for h, other in zip(hists, theirs):
        h.merge(other)
    return bound(binning, hists, finest, max_bins)


def collapse(hists: Sequence[ScoreHistogram], max_bins: int) -> Binning:
    """Coarsen the histograms' grid (halving the bins per octave) until they hold at most
    ``max_bins`` keys in all, or the grid has 1 bin per octave; return the binning.

    The result depends only on the events (and the starting grid), not on how they were
    split or ordered: coarsening happens exactly when the events seen so far fill more
    than ``max_bins`` bins, so merged and per-event histograms agree."""
    binning = hists[0].binning
    while (
        isinstance(binning, LogGridBinning)
        and binning.bins > 1
        and sum(len(h) for h in hists) > max_bins
    ):
        binning = coarsen_all(hists)
    return binning


# ----------------------------------------------------------------------------- shared budgets
# Accumulators with many histograms (MulticlassScores: K * K, MultilabelScores: 2 L) bound
# them together: one budget of entries (histogram, key) for all of them, one binning for all
# of them. The functions below work on the "flat" form of such a set: three arrays
# ``(ids, keys, weights)`` sorted by (histogram index, key), one row per entry.


def coarser_of(a: Binning, b: Binning) -> Binning:
    """The coarser of two binnings of one family (exact < finest grid < ... < coarsest)."""
    if a.exact:
        return b
    if b.exact:
        return a
    return a if a.per_octave <= b.per_octave else b  # type: ignore[attr-defined]  # log grids


def flatten(hists: Sequence[ScoreHistogram], binning: Binning) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(ids, keys, weights)`` of every entry of ``hists`` sorted by (index in hists, key);
    weights float64, or an object array of ints in units mode."""
    from itertools import chain

    sizes = [len(h.weights) for h in hists]
    n = sum(sizes)
    dtype = np.float64 if binning.exact else np.int64
    keys = np.fromiter(chain.from_iterable(h.weights.keys() for h in hists), dtype=dtype, count=n)
    weights = weight_array(chain.from_iterable(h.weights.values() for h in hists), n, units_mode(hists))
    ids = np.repeat(np.arange(len(hists), dtype=np.int64), sizes)
    order = np.lexsort((keys, ids))
    return ids[order], keys[order], weights[order]


def _reduce(ids: np.ndarray, keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Sum the weights of adjacent rows with equal (id, key) (input sorted by (id, key))."""
    if len(ids) < 2:
        return ids, keys, weights
    new = np.empty(len(ids), dtype=bool)
    new[0] = True
    np.not_equal(ids[1:], ids[:-1], out=new[1:])
    new[1:] |= keys[1:] != keys[:-1]
    if new.all():
        return ids, keys, weights
    starts = np.flatnonzero(new)
    return ids[starts], keys[starts], np.add.reduceat(weights, starts)


def regrid_flat(
    flat: tuple[np.ndarray, np.ndarray, np.ndarray], src: Binning, dst: Binning
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A flat set over ``src`` re-keyed on ``dst`` (the same binning or a coarser one):
    exact scores keyed by the grid, grid keys coarsened level by level (the grids nest, so
    this equals keying the scores on ``dst`` directly); still sorted, entries summed."""
    ids, keys, weights = flat
    if src == dst:
        return flat
    if dst.exact:
        raise ValueError(f"cannot refine {src!r} to {dst!r}")
    assert isinstance(dst, LogGridBinning)
    if src.exact:
        keys = dst.keys(np.asarray(keys, dtype=np.float64))  # monotone: still sorted per id
    else:
        assert isinstance(src, LogGridBinning)
        if src.per_octave < dst.per_octave:
            raise ValueError(f"cannot refine {src!r} to {dst!r}")
        b = src
        while b.per_octave > dst.per_octave:
            keys = b.coarsen_keys(keys)
            b = b.coarser()
    return _reduce(ids, keys, weights)


def fit_flat(
    flat: tuple[np.ndarray, np.ndarray, np.ndarray],
    binning: Binning,
    finest: int,
    max_exact: int,
    max_bins: int,
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray], Binning]:
    """The flat set within its budget, and its binning: exact while it holds at most
    ``max_exact`` entries, else on the grid with ``finest`` bins per octave, coarsened level
    by level (beyond 1 bin per octave, up to the coarsest grid) while it holds more than
    ``max_bins``. Exact sets only ever move to the grid and grids only ever coarsen, and
    both happen exactly when the entries of the events seen need it, so the result depends
    only on the events (their multiset), not on how they were split, batched or merged."""
    if binning.exact:
        if len(flat[0]) <= max_exact:
            return flat, binning
        grid = LogGridBinning(finest)
        flat, binning = regrid_flat(flat, binning, grid), grid
    assert isinstance(binning, LogGridBinning)
    while len(flat[0]) > max_bins and not binning.coarsest:
        coarse = binning.coarser()
        flat, binning = _reduce(flat[0], binning.coarsen_keys(flat[1]), flat[2]), coarse
    return flat, binning


def rebuild(hists: Sequence[ScoreHistogram], binning: Binning, flat: tuple[np.ndarray, np.ndarray, np.ndarray]) -> None:
    """Replace the contents of ``hists`` by a flat set (in place: the dicts stay the same
    objects, so cached references to them stay valid)."""
    ids, keys, weights = flat
    bounds = np.searchsorted(ids, np.arange(len(hists) + 1)).tolist()
    key_list, weight_list = keys.tolist(), weights.tolist()
    for i, h in enumerate(hists):
        d = h.weights
        d.clear()
        a, b = bounds[i], bounds[i + 1]
        if a < b:
            d.update(zip(key_list[a:b], weight_list[a:b]))
        h.binning = binning


def add_flat(hists: Sequence[ScoreHistogram], flat: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int:
    """Add a flat set (on the histograms' binning) into them; return the number of new keys."""
    dicts = [h.weights for h in hists]
    before = sum(len(d) for d in dicts)
    ids, keys, weights = flat
    bounds = np.searchsorted(ids, np.arange(len(hists) + 1)).tolist()
    key_list, weight_list = keys.tolist(), weights.tolist()
    for i, d in enumerate(dicts):
        a, b = bounds[i], bounds[i + 1]
        if a == b:
            continue
        if not d:
            d.update(zip(key_list[a:b], weight_list[a:b]))
            continue
        get = d.get
        for k, w in zip(key_list[a:b], weight_list[a:b]):
            d[k] = get(k, 0) + w
    return sum(len(d) for d in dicts) - before


def fit(
    hists: Sequence[ScoreHistogram], binning: Binning, entries: int, finest: int | None,
    max_exact: int | None, max_bins: int | None,
) -> tuple[Binning, int]:
    """:func:`fit_flat` in place on histograms holding ``entries`` keys in all; returns the
    binning and the entries. A no-op (no array built) while within the budget; ``finest``
    None: unbounded (``exact=True``)."""
    if finest is None or max_exact is None or max_bins is None:
        return binning, entries
    if binning.exact and entries <= max_exact:
        return binning, entries
    if not binning.exact and (entries <= max_bins or binning.coarsest):  # type: ignore[attr-defined]  # a log grid
        return binning, entries
    flat, binning = fit_flat(flatten(hists, binning), binning, finest, max_exact, max_bins)
    rebuild(hists, binning, flat)
    return binning, len(flat[0])


# ----------------------------------------------------------------------------- JSON
def _compact(values: np.ndarray) -> list:
    """Floats as a JSON list, integral ones (below 2**53) written as ints."""
    if len(values) and np.all((values == np.floor(values)) & (np.abs(values) < 2.0**53)):
        return values.astype(np.int64).tolist()  # (exact: whole and below 2**53)
    return [int(v) if v.is_integer() and abs(v) < 2.0**53 else v for v in values.tolist()]


def histograms_to_json(hists: Sequence[ScoreHistogram], names: Sequence[str],
                       levels: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, Any]:
    """JSON-safe dict of several histograms of one binning on a shared key list:
    ``{"key_deltas" | "scores": [...], names[i]: [weights aligned on the keys]}``, plus
    ``"residues": {name: [[index, residue], ...]}`` for the weights (units mode) that are not
    exactly their floats (the key is absent when there are none). ``levels``: :func:`aligned` of
    ``hists`` when the caller holds it already."""
    binning = hists[0].binning
    if levels is None and sum(len(h) for h in hists) <= SMALL_KEYS and all(h.binning is binning for h in hists):
        # few keys: the same dict in plain Python, without the arrays' set-up (issue 12)
        return small_histograms_to_json([h.weights for h in hists], names, binning.exact)
    keys, weights = aligned(*hists) if levels is None else levels
    if hists[0].binning.exact:
        out: dict[str, Any] = {"scores": keys.tolist()}
    else:
        out = {"key_deltas": np.diff(keys, prepend=0).tolist()}
    for name, row in zip(names, weights):
        out[name] = _compact(row)
    if units_mode(hists):
        key_list = keys.tolist()
        residues = {}
        for name, h in zip(names, hists):
            get = h.weights.get
            r = encode_residues([get(k, 0) for k in key_list])
            if r is not None:
                residues[name] = r
        if residues:
            out["residues"] = residues
    return out


def histograms_from_json(
    data: Mapping[str, Any], binning: Binning, names: Sequence[str], exact_weights: bool = False
) -> list[ScoreHistogram]:
    """Inverse of :func:`histograms_to_json`; ``ValueError`` on anything malformed.
    ``exact_weights`` (accumulators that keep exact weight sums): the histograms are in
    units mode when residues are present or a weight is not whole, else float mode; without
    it, weights are floats and residues are refused."""
    if not isinstance(data, Mapping):
        raise ValueError(f"histogram must be a mapping, got {type(data).__name__}")
    key_field = "scores" if binning.exact else "key_deltas"
    expected = {key_field, *names}
    if set(data) - {"residues"} != expected:
        raise ValueError(f"histogram keys must be {sorted(expected)} (and 'residues'), got {sorted(map(str, data))}")
    residues = data.get("residues")
    if residues is not None and not exact_weights:
        raise ValueError("histogram residues are not accepted here (no exact weight sums)")
    if residues is not None and (not isinstance(residues, Mapping) or not residues or not set(residues) <= set(names)):
        raise ValueError(f"histogram residues must map some of {list(names)} to residues, got {describe(residues)}")
    raw = data[key_field]
    if not isinstance(raw, list):
        raise ValueError(f"histogram {key_field!r} must be a list")
    if binning.exact:
        keys = _number_array(raw, "histogram scores")
        binning.check_keys(keys, "histogram scores")
        keys = keys + 0.0
    else:
        if any(type(v) is not int for v in raw):
            raise ValueError("histogram key_deltas must be ints")
        if any(abs(v) > 1 << 40 for v in raw):
            raise ValueError("histogram key_deltas out of range")
        keys = np.cumsum(np.asarray(raw, dtype=np.int64)) if raw else np.zeros(0, np.int64)
        binning.check_keys(keys, "histogram keys")
    if len(keys) > 1 and not (np.diff(keys) > 0).all():
        raise ValueError(f"histogram {key_field} must give strictly ascending keys")
    hists = []
    units = residues is not None
    for name in names:
        row = data[name]
        if not isinstance(row, list) or len(row) != len(keys):
            raise ValueError(f"histogram {name!r} must be a list of {len(keys)} weights")
        w = _number_array(row, f"histogram {name}")
        if len(w) and (w.min() < 0 or w.sum() > MAX_TOTAL_WEIGHT):
            raise ValueError(f"histogram {name!r} weights must be non-negative with a finite sum")
        units = units or (exact_weights and not bool(np.all(w == np.floor(w))))
        h = ScoreHistogram(binning)
        nz = np.flatnonzero(w)
        h.weights = dict(zip(keys[nz].tolist(), w[nz].tolist()))
        hists.append(h)
    if units:  # units mode: the written floats plus their residues, exactly
        key_list = keys.tolist()
        for name, h in zip(names, hists):
            values = [float(v) for v in data[name]]
            exact = decode_residues((residues or {}).get(name), values, f"histogram residues[{name!r}]")
            if exact is None:
                to_units([h])
            else:
                h.weights = {k: u for k, u in zip(key_list, exact) if u}
    return hists


def _number_array(values: list, name: str) -> np.ndarray:
    for i, v in enumerate(values):
        if type(v) not in (int, float):
            raise ValueError(f"{name}[{i}] must be a number, got {v!r}")
    arr = np.asarray(values, dtype=np.float64)
    if len(arr) and not np.isfinite(arr).all():
        i = int(np.argmax(~np.isfinite(arr)))
        raise ValueError(f"{name}[{i}] must be finite, got {values[i]!r}")
    return arr
