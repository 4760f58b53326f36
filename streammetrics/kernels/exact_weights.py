"""Exact sums of weights per key: summed weights that depend only on the multiset of events.

A float sum of weights (``cell += w``) depends on the order of the additions unless every
partial sum is a float: true for whole-number weights (the default 1.0, counts such as 3.0)
while a sum stays below ``2**53``, false for weights such as 0.1 or 2.7. Replay folds a
window's events in time order, Spark merges partial states after a shuffle: with such
weights they would disagree in the last bits, and "any split, merged in any order, gives
the same state" (contract section 1) would not hold.

So a summed weight is kept either as a float while every weight added to it is a whole
number (:func:`is_whole`; the sum is then exact: the fast path of unit-weight streams), or
as a Python ``int`` of units of ``2**-1074`` (:data:`UNIT` per 1.0; every finite float is a
whole number of them, so the sum is exact, associative and commutative; see
:mod:`streammetrics.kernels.exact_sum`) once a weight that is not a whole number arrives.
An accumulator switches its weight containers to units when it first sees such a weight
(:func:`to_units` converts a float sum exactly) and after a merge with a state in units.

JSON. A summed weight is written as its correctly rounded float (the value a metric reads,
:func:`value_of`) and, when that float is not the exact sum, the rest of its canonical
expansion (:func:`residue_of`, ``[mantissa, exponent]`` int pairs as in
:func:`~streammetrics.kernels.exact_sum.to_pair`). :func:`encode_residues` lists the residues of
a sequence of sums as ``[[index, residue], ...]`` (None when every sum is exactly its float:
states of whole-number weights keep their bytes), :func:`decode_residues` validates them and
returns the exact units.

Vectorised batches: :func:`grouped_units` sums the weights of each key (e.g. a histogram
bin) exactly in one pass of numpy calls: mantissas summed per (key, exponent) in int64.

>>> a = [0.1, 0.2, 0.3]
>>> value_of(sum(units_of(w) for w in a)), (0.1 + 0.2) + 0.3, 0.1 + (0.2 + 0.3)
(0.6, 0.6000000000000001, 0.6)
>>> residue_of(units_of(0.1) + units_of(0.2))
[[-4503599627370496, -107]]
>>> keys, units = grouped_units(np.array([3, 1, 3]), np.array([0.1, 2.5, 0.2]))
>>> keys.tolist(), [value_of(u) for u in units]
([1, 3], [2.5, 0.30000000000000004])
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from streammetrics.core.state import describe
from streammetrics.kernels.exact_sum import MAX_EXPANSION, expansion_of, float_of, from_pair, to_pair, units_of

__all__ = ["UNIT", "WHOLE_MAX", "FLOAT_EXACT", "is_whole", "all_whole", "units_of", "value_of", "to_units",
           "residue_of", "with_residue", "encode_residues", "decode_residues", "encode_sums", "decode_sums",
           "grouped_units", "units_by_key", "values_of", "whole_floats"]

#: units of ``2**-1074`` per 1.0
UNIT = 1 << 1074
#: whole-number weights up to this are summed as floats (exact while a sum stays below 2**53)
WHOLE_MAX = float(1 << 32)
#: float sums of whole weights stay floats while at most this (below 2**53, where they would
#: round); an accumulator whose sum would pass it switches to units
FLOAT_EXACT = float(1 << 52)

value_of = float_of  # units -> the correctly rounded float (half-even)
_MANT = (1 << 52) - 1
_LOW = (1 << 21) - 1


def is_whole(w: float) -> bool:
    """True if a float sum of ``w`` stays exact: a whole number up to :data:`WHOLE_MAX`.

    >>> is_whole(1.0), is_whole(3.0), is_whole(0.5), is_whole(2.0**40)
    (True, True, False, False)
    """
    return w.is_integer() and w <= WHOLE_MAX


def all_whole(w: np.ndarray) -> bool:
    """:func:`is_whole` of every weight of a float64 array (finite, non-negative)."""
    return bool(((w == np.floor(w)) & (w <= WHOLE_MAX)).all())


def to_units(x: float | int) -> int:
    """A summed weight (a float of a whole-number sum, or units already) in units."""
    return x if isinstance(x, int) else units_of(x)


def whole_floats(weights: dict, units: bool) -> dict | None:
    """A dict of summed weights as floats: as they are, or in units mode the whole numbers they
    hold (None if one is not whole or above 2**53)."""
    if not units:
        return weights
    out = {}
    for key, u in weights.items():
        whole, rest = divmod(u, UNIT)
        if rest or whole > 2**53:
            return None
        out[key] = float(whole)
    return out


def values_of(sums: Sequence[float | int]) -> list[float]:
    """The floats of summed weights (floats pass through, units are rounded)."""
    return [x if isinstance(x, float) else float_of(x) for x in sums]


def residue_of(units: int) -> list[list[int]] | None:
    """The rest of the canonical expansion of ``units`` beyond its correctly rounded float,
    as ``[mantissa, exponent]`` pairs; None when the float is exact."""
    parts = expansion_of(units)
    return [to_pair(c) for c in parts[1:]] if len(parts) > 1 else None


def with_residue(value: float, residue: Any, name: str) -> int:
    """The units of ``value`` plus its residue (:func:`residue_of`); ``ValueError`` unless
    they form the canonical expansion of their sum."""
    if not isinstance(residue, list) or not 1 <= len(residue) < MAX_EXPANSION:
        raise ValueError(f"{name} residue must be a list of 1 to {MAX_EXPANSION - 1} [mantissa, exponent] pairs, "
                         f"got {describe(residue)}")
    parts = [value] + [from_pair(p, name) for p in residue]
    units = sum(units_of(c) for c in parts)
    if expansion_of(units) != parts:
        raise ValueError(f"{name} and its residue are not the canonical expansion of their sum")
    return units


def encode_residues(sums: Sequence[float | int]) -> list[list[Any]] | None:
    """``[[index, residue], ...]`` of the sums (floats or units) whose float is not exact,
    in index order; None if there are none."""
    out = [[i, r] for i, x in enumerate(sums) if x.__class__ is int and (r := residue_of(x)) is not None]
    return out or None


def decode_residues(raw: Any, values: Sequence[float], name: str) -> list[int] | None:
    """The exact units of ``values`` (the written floats) with the residues ``raw`` of
    :func:`encode_residues`, or None when ``raw`` is None (every value exact as a float:
    the caller keeps floats, or converts with :func:`units_of`). ``ValueError`` naming
    ``name`` on anything malformed: indices must increase and lie within ``values``."""
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or len(raw) > len(values):
        raise ValueError(f"{name} must be null or a non-empty list of [index, residue] "
                         f"(at most {len(values)}), got {describe(raw)}")
    units = [units_of(v) for v in values]
    last = -1
    for j, item in enumerate(raw):
        if not isinstance(item, list) or len(item) != 2 or item[0].__class__ is not int:
            raise ValueError(f"{name}[{j}] must be [index, residue], got {describe(item)}")
        i = item[0]
        if not last < i < len(values):
            raise ValueError(f"{name}[{j}] index {i} is out of order or beyond the {len(values)} values")
        last = i
        units[i] = with_residue(values[i], item[1], f"{name}[{j}]")
    return units


def encode_sums(sums: Sequence[float | int]) -> tuple[list[float], list[list[Any]] | None]:
    """A list of summed weights (all floats, or all units) as its floats and their residues
    (:func:`encode_residues`; None in float mode)."""
    if not sums or isinstance(sums[0], float):
        return list(sums), None  # float mode: every sum a float
    return values_of(sums), encode_residues(sums)


def decode_sums(values: Sequence[float], residues: Any, name: str) -> list:
    """The decode rule of summed weights: the written floats ``values`` as units when
    ``residues`` (:func:`decode_residues`, refused under ``name`` if malformed) are present or
    a value is not whole (:func:`is_whole`), else the floats themselves (float mode)."""
    units = decode_residues(residues, values, name)
    if units is None and not all(is_whole(v) for v in values):
        units = [units_of(v) for v in values]
    return list(values) if units is None else units


def units_by_key(keys: np.ndarray, w: np.ndarray) -> dict[Any, int]:
    """:func:`grouped_units` as a dict: key -> exact weight sum in units (keys present only).

    >>> units_by_key(np.array([1, 0, 1]), np.array([0.5, 2.0, 0.25])) == {0: 2 * UNIT, 1: 3 * UNIT // 4}
    True
    """
    keys_present, units = grouped_units(keys, w)
    return dict(zip(keys_present.tolist(), units))


def grouped_units(keys: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, list[int]]:
    """``(distinct keys ascending, exact weight sum of each in units)`` of finite
    non-negative float64 weights ``w`` grouped by ``keys`` (any sortable numpy dtype):
    mantissas summed per (key, exponent) in int64 (high and low bits apart, so any number
    of terms fits), then shifted into units in Python ints, one per (key, exponent)."""
    w = np.ascontiguousarray(w, dtype=np.float64)
    if not len(w):
        return keys[:0], []
    if not np.isfinite(w).all() or (w < 0).any():
        raise ValueError("exact weight sums take finite non-negative weights")
    bits = w.view(np.int64)
    biased = (bits >> 52) & 0x7FF
    mant = bits & _MANT
    normal = biased > 0
    mant[normal] |= 1 << 52
    shift = np.where(normal, biased - 1, 0)  # w = mant * 2**shift units
    if keys.dtype.kind in "iu" and int(keys.max()) - int(keys.min()) < 1 << 50:
        # small int keys: one argsort of (key, exponent) packed in an int64 (exponents < 2**11)
        combined = ((keys.astype(np.int64) - int(keys.min())) << 11) | shift
        order = np.argsort(combined, kind="stable")  # (radix-like for int64: ~2x a quicksort here)
        combined = combined[order]
        k, shift, mant = keys[order], shift[order], mant[order]
        new = np.empty(len(k), dtype=bool)
        new[0] = True
        np.not_equal(combined[1:], combined[:-1], out=new[1:])
    else:
        order = np.lexsort((shift, keys))
        k, shift, mant = keys[order], shift[order], mant[order]
        new = np.empty(len(k), dtype=bool)
        new[0] = True
        new[1:] = (k[1:] != k[:-1]) | (shift[1:] != shift[:-1])
    starts = np.flatnonzero(new)
    high = np.add.reduceat(mant >> 21, starts).tolist()
    low = np.add.reduceat(mant & _LOW, starts).tolist()
    group_keys = k[starts]
    first = np.empty(len(starts), dtype=bool)
    first[0] = True
    first[1:] = group_keys[1:] != group_keys[:-1]
    out: list[int] = []
    for is_first, s, h, lo in zip(first.tolist(), shift[starts].tolist(), high, low):
        u = ((h << 21) + lo) << s
        if is_first:
            out.append(u)
        else:
            out[-1] += u
    return group_keys[first], out
