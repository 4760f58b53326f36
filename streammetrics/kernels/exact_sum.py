"""Exact, order-independent float sums: the state is a function of the multiset of terms.

A float sum folded term by term (``s += x``) depends on the order of the additions, so two
engines that split and merge a stream differently (replay's sequential fold, Spark's partial
states merged after a shuffle) disagree in the last digits. :class:`ExactSum` keeps the
*exact* value of a sum of float64 terms instead, so that any split, batching, merge order or
removal gives the same bits.

Representation. Every finite float64 is an integer multiple of ``2**-1074`` (the smallest
subnormal), so a sum of them is an integer number of such units: a Python ``int`` (at most
~2,100 bits; a superaccumulator). Adding two sums adds two ints: exact, associative and
commutative.

Per-event cost. The per-event paths only ``append`` a term (or its argument) to a bounded list
(:data:`BUFFER`, 1,024 terms); :func:`exact_units` folds a buffer in one vectorised pass
(error-free extraction in levels, see :func:`exact_units_rows`; what is left near the ends of
the float range has its integer mantissas summed per exponent in int64), and
:func:`exact_units_rows` folds several rows in the same numpy calls. Reading a value, merging,
copying or ``to_dict`` folds first.

JSON. :meth:`ExactSum.expansion` is the canonical non-overlapping expansion of the exact value:
``c0 = round(S)``, ``c1 = round(S - c0)``, ... until the rest is 0 (each ``ci`` correctly rounded,
round-half-even; usually one or two floats, at most ~40). Its first element is the correctly
rounded sum (what a state writes where it wrote its float sum before, equal to
``math.fsum`` of the terms), the rest is the *residue* a state writes next to it so that a
restored sum continues exactly. :func:`from_expansion` checks the expansion is the canonical
one of its own value (``ValueError`` otherwise), so a hand-made or corrupted residue cannot
enter a state.

Limits: a term that is not finite (an overflowed product) makes the value ``inf``, ``-inf`` or
``nan`` from then on (the exact part is kept apart); a sum of finite terms beyond the float64
range reads as ``inf``/``-inf`` (its exact value is kept, so it can come back into range by
removal); products such as ``w * x`` are rounded once per term *before* summation, by the
caller, identically on every path.

>>> s = ExactSum()
>>> s.terms.extend([0.1, 0.2, 0.3, -0.6])
>>> s.value, 0.1 + 0.2 + 0.3 - 0.6  # the exact sum of the four floats, and a rounded fold
(2.7755575615628914e-17, 1.1102230246251565e-16)
>>> ExactSum().add_array([1e100, 1.0, -1e100]).value
1.0
>>> ExactSum().add_array([1e100, 1.0]).expansion()
[1e+100, 1.0]
"""
from __future__ import annotations

import math
import struct
from typing import Any, Iterable, Sequence

import numpy as np

__all__ = ["BUFFER", "ExactSum", "ProbabilitySums", "probability_terms", "exact_units", "exact_units_rows", "units_of",
           "float_of", "expansion_of", "from_expansion", "MAX_EXPANSION", "two_product", "add_rows", "as_array",
           "LogLossSum", "to_pair", "to_pairs", "from_pair",
           "log_p_and_brier", "batch_probability_units", "run_sums", "fold_sums"]

#: terms a per-event buffer holds before it is folded (bounded memory, amortised numpy call)
BUFFER = 1024
#: the longest canonical expansion (the exact range spans ~2,100 bits, >= 1 bit per element)
MAX_EXPANSION = 48
_SCALE = 1 << 1074  # units per 1.0
_MANT = (1 << 52) - 1
_LOW = (1 << 21) - 1
_CHUNK = 1024  # terms per extraction: 1,024 multiples of ulp(sigma) <= 2**-11 sigma sum exactly
_LEVELS = 5
#: buffers of at most this many terms are summed in plain Python ints (numpy's per-call set-up
#: costs more than a few terms: a 10-event window's fold, issue 12); the same exact integer
SMALL = 64
_NEXT_LEVEL = 2.0**-41  # |r| <= ulp(sigma)/2 after a level: the next sigma is 2**-41 sigma
_frexp = math.frexp
_INF = math.inf
_ldexp = math.ldexp


def exact_units(x: Any) -> int:
    """``sum(x)`` exactly, in units of ``2**-1074`` (a Python int): float64 ``x``, finite.

    >>> exact_units([0.5, 0.25]) == (3 << 1074) // 4
    True
    """
    return exact_units_rows(np.ascontiguousarray(x, dtype=np.float64).reshape(1, -1))[0]


def exact_units_rows(a: np.ndarray) -> list[int]:
    """The exact sum of each row of a 2-D float64 array (finite), in units of ``2**-1074``.

    Error-free extraction (Rump, Ogita & Oishi's AccSum): with ``sigma`` a power of two
    ``>= 2**11 * max|x|``, ``q = (sigma + x) - sigma`` is exact, so is ``x - q``, and the ``q``
    (multiples of ``ulp(sigma)``, at most 1,024 of them) sum exactly in float64. Three levels
    take the 53 bits of terms of one magnitude; what is left after :data:`_LEVELS` (or near the
    ends of the float range) goes through :func:`_integer_units` (integer mantissas summed per
    exponent).
    """
    if a.shape[0] > 1 and 0 < a.shape[1] <= _CHUNK:
        return _rows_units(a)
    return [_row_units(row) for row in a]


def _rows_units(a: np.ndarray) -> list[int]:
    """:func:`exact_units_rows` of rows of at most :data:`_CHUNK` terms: the levels of
    :func:`_row_units`, every row at once (one ``sigma`` per row, any for a row of zeros);
    terms that are not finite, or levels that would leave the float range, go through
    :func:`_row_units` row by row."""
    top = np.abs(a).max(axis=1).tolist()
    if not all(t < _INF for t in top):  # terms that are not finite (nan compares false)
        return [_row_units(row) for row in a]
    xs = [_frexp(t)[1] + 11 if t else 0 for t in top]  # level 1: sigma = 2**x >= 2**11 * max|row|
    if max(xs) >= 960 or min(xs) - 41 * _LEVELS <= -960:  # levels near the ends of the float range
        return [_row_units(row) for row in a]
    return _level_units(a.copy(), xs)


def _level_units(a: np.ndarray, xs: list[int]) -> list[int]:
    """The exact sum of each row of ``a`` in units, overwriting ``a``: :data:`_LEVELS` levels
    of extraction from ``sigma = 2**x`` (``xs``: one ``x`` per row, ``2**x >= 2**11 * max|row|``,
    every level's ``x`` above -960) down, then what is left through :func:`_integer_units`. A
    level's row sum is ``k * 2**(x - 53)`` with ``|k| <= 2**53`` (at most 1,024 multiples of
    ``2**(x - 53)``, the spacing of floats just below ``sigma``, exact in float64): ``k << (x + 1021)``
    units, ``k`` read for every row at once."""
    totals = [0] * a.shape[0]
    x = np.array(xs, dtype=np.int64)
    sigma = np.ldexp(1.0, x)[:, None]
    q = np.empty_like(a)
    for level in range(_LEVELS):
        np.add(a, sigma, out=q)
        q -= sigma  # exact: a multiple of ulp(sigma); a -= q is exact too
        a -= q
        k = np.ldexp(q.sum(axis=1), 53 - x)  # (exact: a power-of-two scaling to an integer below 2**53)
        rows = np.flatnonzero(k)
        if len(rows):
            for i, m, shift in zip(rows.tolist(), k[rows].astype(np.int64).tolist(), (x[rows] + 1021).tolist()):
                totals[i] += m << shift
        if level and not a.any():  # (after the first level something is nearly always left)
            return totals
        x = x - 41  # |r| <= ulp(sigma)/2 = 2**(x - 53): the next sigma 2**(x - 41) >= 2**12 * max|r|
        sigma = sigma * _NEXT_LEVEL
    for i, row in enumerate(a):
        if row.any():
            totals[i] += _integer_units(row)
    return totals


def _row_units(a: np.ndarray) -> int:
    """One row of :func:`exact_units_rows` (scalar ``sigma``: few numpy calls per level)."""
    if a.shape[0] <= SMALL:
        return small_units(a.tolist())
    total = 0
    for start in range(0, a.shape[0], _CHUNK):
        r = a[start : start + _CHUNK]
        if r.shape[0] == 0:
            continue
        top = max(float(r.max()), -float(r.min()))
        if top == 0.0:
            continue
        if top != top or top == _INF:
            raise ValueError("exact sums take finite terms")
        x = _frexp(top)[1] + 11  # level 1: sigma = 2**x >= 2**11 * max|r|
        for _level in range(_LEVELS):
            if not -960 < x < 960:  # near the ends of the float range: the integer path
                break
            sigma = _ldexp(1.0, x)
            q = (r + sigma) - sigma
            r = r - q
            total += units_of(float(q.sum()))
            if not r.any():
                break
            x -= 41  # |r| <= ulp(sigma)/2 = 2**(x - 53): the next sigma 2**(x - 41) >= 2**12 * max|r|
        else:
            total += _integer_units(r)
            continue
        if r.any():
            total += _integer_units(r)
    return total


def _integer_units(a: np.ndarray) -> int:
    """``sum(a)`` exactly in units of ``2**-1074``: mantissas summed per exponent in int64."""
    if a.size == 0:
        return 0
    bits = np.ascontiguousarray(a).view(np.int64)
    biased = (bits >> 52) & 0x7FF
    mant = bits & _MANT
    normal = biased > 0
    mant[normal] |= 1 << 52  # (fresh arrays: ``bits & _MANT`` made a copy)
    shift = np.where(normal, biased - 1, 0)  # x = mant * 2**shift units
    mant = np.where(bits < 0, -mant, mant)
    order = np.argsort(shift, kind="stable")
    shift, mant = shift[order], mant[order]
    starts = np.concatenate(([0], np.flatnonzero(np.diff(shift)) + 1))
    # per-exponent sums in int64 without overflow: high 32 bits and low 21 bits apart
    high = np.add.reduceat(mant >> 21, starts)
    low = np.add.reduceat(mant & _LOW, starts)
    total = 0
    for s, h, lo in zip(shift[starts].tolist(), high.tolist(), low.tolist()):
        total += ((h << 21) + lo) << s
    return total


def small_units(terms: list[float]) -> int:
    """``sum(terms)`` exactly in units of ``2**-1074`` for a short list of finite floats: each
    term's integer ratio ``n / 2**k`` is ``n << (1074 - k)`` units (the same integer as the
    vectorised path, which pays off past :data:`SMALL` terms).

    >>> small_units([0.5, 0.25]) == exact_units([0.5, 0.25])
    True
    """
    total = 0
    try:
        for x in terms:
            n, d = x.as_integer_ratio()  # OverflowError for +-inf, ValueError for nan
            total += n << (1075 - d.bit_length())
    except (OverflowError, ValueError):
        raise ValueError("exact sums take finite terms") from None
    return total


def as_array(terms: list[float]) -> np.ndarray:
    """A per-event buffer as a float64 array (``struct.pack``: ~3x faster than ``np.fromiter``)."""
    return np.frombuffer(struct.pack(f"{len(terms)}d", *terms), dtype=np.float64)


def units_of(x: float) -> int:
    """The float ``x`` (finite) in units of ``2**-1074``, exactly."""
    num, den = x.as_integer_ratio()  # den = 2**k, k <= 1074: units = num * 2**(1074 - k)
    return num << (1075 - den.bit_length())


def float_of(units: int) -> float:
    """``units * 2**-1074`` correctly rounded (half-even); +-inf beyond the float range."""
    try:
        return units / _SCALE  # int / int true division is correctly rounded in Python
    except OverflowError:
        return math.inf if units > 0 else -math.inf


def expansion_of(units: int) -> list[float]:
    """The canonical non-overlapping expansion of ``units * 2**-1074`` (``[0.0]`` for 0)."""
    out = []
    rest = units
    while True:
        c = float_of(rest)
        out.append(c)
        if not math.isfinite(c):
            return out  # beyond the float range (not representable in JSON floats anyway)
        rest -= units_of(c)
        if not rest:
            return out


def from_expansion(values: Any, name: str = "sum") -> int:
    """Units of an expansion written by :meth:`ExactSum.expansion`; ``ValueError`` unless it
    is a list of finite floats that is the canonical expansion of its own sum."""
    if not isinstance(values, list) or not 1 <= len(values) <= MAX_EXPANSION:
        raise ValueError(f"{name} must be a list of 1 to {MAX_EXPANSION} floats, got {values!r:.80}")
    units = 0
    for v in values:
        if v.__class__ is int:
            v = float(v)
        if v.__class__ is not float or not math.isfinite(v):
            raise ValueError(f"{name} must hold finite floats, got {v!r:.80}")
        units += units_of(v)
    if expansion_of(units) != [float(v) for v in values]:
        raise ValueError(f"{name} is not the canonical expansion of its sum: {values!r:.120}")
    return units


def to_pair(x: float) -> list[int]:
    """A finite float as ``[m, e]`` with ``x == m * 2**e`` exactly, ``2**52 <= |m| < 2**53``
    (``[0, 0]`` for 0): integers, so a residue never prints in exponent form (JSON encoders
    then agree byte for byte) and reads back exactly.

    >>> to_pair(0.1), from_pair(to_pair(0.1)) == 0.1
    ([7205759403792794, -56], True)
    """
    if x == 0.0:
        return [0, 0]
    m, e = _frexp(x)
    return [int(m * 9007199254740992.0), e - 53]


def to_pairs(values: Sequence[float]) -> list[list[int]]:
    """:func:`to_pair` of each finite float, in one vectorised pass (``frexp``: the same pairs).

    >>> to_pairs([0.1, 0.0, -3.0]) == [to_pair(0.1), to_pair(0.0), to_pair(-3.0)]
    True
    """
    m, e = np.frexp(np.asarray(values, dtype=np.float64))
    e[m == 0.0] = 53  # (0.0: [0, 0])
    return [list(p) for p in zip((m * 9007199254740992.0).astype(np.int64).tolist(), (e - 53).tolist())]


def from_pair(raw: Any, name: str = "sum") -> float:
    """The float of a :func:`to_pair` pair; ``ValueError`` unless it is that canonical pair."""
    if (not isinstance(raw, list) or len(raw) != 2 or raw[0].__class__ is not int
            or raw[1].__class__ is not int or not -1200 < raw[1] < 1100):
        raise ValueError(f"{name} residue must hold [mantissa, exponent] int pairs, got {raw!r:.80}")
    x = _ldexp(float(raw[0]), raw[1]) if abs(raw[0]) < (1 << 53) else math.nan
    if not math.isfinite(x) or to_pair(x) != raw:
        raise ValueError(f"{name} residue holds a non-canonical pair {raw!r:.80}")
    return x


class ExactSum:
    """The exact sum of float64 terms (see the module docstring).

    Per-event paths append to :attr:`terms` (and fold once it holds :data:`BUFFER` terms:
    ``if len(s.terms) >= BUFFER: s.fold()``); batches go through :meth:`add_array`.
    ``value`` is the correctly rounded sum, ``expansion()`` its canonical exact form.

    >>> a, b = ExactSum().add_array([0.1, 0.7]), ExactSum().add_array([0.3])
    >>> (a.copy().merge(b)).expansion() == (b.copy().merge(a)).expansion()
    True
    """

    __slots__ = ("terms", "_units", "_special", "_read")

    def __init__(self, units: int = 0) -> None:
        #: pending terms (a list object that is never replaced: fast paths may hold it)
        self.terms: list[float] = []
        self._units = units
        self._special = 0.0  # the sum of non-finite terms (inf, -inf or nan; 0.0: none)
        #: the last expansion read, with the units object it is of (an int is immutable: any
        #: change of the sum makes ``_units`` another object, so ``is`` tells it is still valid)
        self._read: tuple[int, list[float]] | None = None

    def fold(self) -> "ExactSum":
        """Add the pending terms exactly and empty the buffer (in place)."""
        terms = self.terms
        if terms:
            if len(terms) <= SMALL:
                try:
                    self._units += small_units(terms)  # plain Python: the same exact integer
                except ValueError:  # an overflowed term: add_array keeps it apart
                    self.add_array(as_array(terms))
            else:
                self.add_array(as_array(terms))
            terms.clear()
        return self

    def add(self, x: float) -> "ExactSum":
        """Add one term (buffered)."""
        terms = self.terms
        terms.append(x)
        if len(terms) >= BUFFER:
            self.fold()
        return self

    def add_array(self, x: Iterable[float] | np.ndarray) -> "ExactSum":
        """Add a batch of terms exactly (vectorised)."""
        a = x if isinstance(x, np.ndarray) else np.fromiter(x, dtype=np.float64)
        if not np.isfinite(a).all():  # an overflowed term (e.g. weight * huge margin): inf/nan from now on
            bad = ~np.isfinite(a)
            self._special = float(a[bad].sum()) + self._special
            a = a[~bad]
        self._units += exact_units(a)
        return self

    def add_units(self, units: int) -> "ExactSum":
        """Add an exact value given in units of ``2**-1074`` (e.g. a row of :func:`exact_units_rows`):
        ``merge(ExactSum(units))`` without the object."""
        self._units += units
        return self

    def merge(self, other: "ExactSum") -> "ExactSum":
        """Add ``other``'s exact value (``other`` is folded, not otherwise changed)."""
        self._units += other.units
        self._special += other._special
        return self

    def copy(self) -> "ExactSum":
        out = type(self)(self.units)
        out._special = self._special
        return out

    def reset(self) -> "ExactSum":
        self.terms.clear()
        self._units = 0
        self._special = 0.0
        return self

    @property
    def units(self) -> int:
        """The exact value in units of ``2**-1074``."""
        if self.terms:
            self.fold()
        return self._units

    @property
    def value(self) -> float:
        """The correctly rounded sum (``math.fsum`` of the terms)."""
        exp = self._expansion()  # (folds first: a pending overflowed term sets _special)
        return self._special if self._special else exp[0]

    def _expansion(self) -> list[float]:
        """:func:`expansion_of` the units, computed once per value of the sum (not to be changed)."""
        units = self.units
        read = self._read
        if read is not None and read[0] is units:
            return read[1]
        exp = expansion_of(units)
        self._read = (units, exp)
        return exp

    def expansion(self) -> list[float]:
        """The canonical expansion: ``[value, residue...]`` (see the module docstring)."""
        return list(self._expansion())

    def parts(self) -> tuple[float, list[list[int]]]:
        """``(value, residue())`` from one expansion (what a state writes for the sum)."""
        exp = self._expansion()
        return (self._special if self._special else exp[0]), [to_pair(c) for c in exp[1:]]

    def residue(self) -> list[list[int]]:
        """The expansion without its first element, each float as ``[m, e]`` (``m * 2**e``,
        see :func:`to_pair`; ``[]`` when the value is a float)."""
        return [to_pair(c) for c in self._expansion()[1:]]

    @classmethod
    def overflowed(cls, value: float) -> "ExactSum":
        """A sum of which only its non-finite float survives (``inf``, ``-inf`` or ``nan``)."""
        out = cls()
        out._special = value
        return out

    @classmethod
    def from_parts(cls, value: Any, residue: Any, name: str = "sum") -> "ExactSum":
        """Rebuild from a state's rounded ``value`` and its ``residue`` (validated)."""
        if residue is None:  # an older state without residue: its float is the exact value
            residue = []
        if not isinstance(residue, list) or len(residue) >= MAX_EXPANSION:
            raise ValueError(f"{name} residue must be a list of [mantissa, exponent] pairs, got {residue!r:.80}")
        return cls(from_expansion([value, *(from_pair(p, name) for p in residue)], name))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ExactSum) and self.units == other.units and (
            self._special == other._special or (self._special != self._special and other._special != other._special))

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        return f"ExactSum({self.expansion()!r})"


def _two_sum_rows(grid: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`run_sums`' double-double: per column of ``grid`` (its rows added in order) the
    folded sum ``total``, the rounded sum ``carry`` of the exact TwoSum errors of those
    additions and ``lost``, the sum of the magnitudes of the exact errors of ``carry``'s own
    additions (0: ``carry`` is exact)."""
    width = grid.shape[1]
    total, err, carry, lost = grid[0].copy(), np.empty(width), np.zeros(width), np.zeros(width)
    back, part = np.empty(width), np.empty(width)

    def two_sum(a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:  # out = err(a + b) exactly
        new = a + b
        np.subtract(new, a, out=back)
        np.subtract(new, back, out=part)
        np.subtract(a, part, out=part)
        np.subtract(b, back, out=back)
        np.add(part, back, out=out)
        return new

    for x in grid[1:]:
        total = two_sum(total, x, err)
        carry = two_sum(carry, err, err)
        lost += np.abs(err, out=err)
    return total, carry, lost


def run_sums(terms: np.ndarray, lengths: np.ndarray, width: int = 64) -> np.ndarray:
    """The vectorised twin of ``math.fsum``: per run of ``terms`` (consecutive runs of the
    given ``lengths``) the correctly rounded sum, ``fsum`` of the run, the same float.

    Runs of 1 to ``width`` terms are columns of one matrix, added row by row as a double-double
    (``S + x`` and its exact error by TwoSum, the errors added into ``E``, whose own exact
    errors are kept too: Ogita, Rump, Oishi 2005, Sum2/Sum3). The result ``r = fl(S + E)`` is
    the correctly rounded sum when ``E`` is exact (a single rounding of the exact sum, half to
    even as ``fsum``), or when ``S + E = r + t`` (TwoSum) and ``|t|`` plus the bound on ``E``'s
    error is below half the smaller gap around ``r``; every other run (neither verified, not
    finite, zero, longer, empty) is summed by ``math.fsum``."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(len(lengths))
    ends = np.cumsum(lengths)
    starts = ends - lengths
    rows = (lengths > 0) & (lengths <= width)
    chosen = np.flatnonzero(rows)
    if len(chosen):
        k = int(lengths[chosen].max())
        runs = len(chosen)
        shift = np.repeat(np.arange(0, runs * k, k, dtype=np.int64) - starts[chosen], lengths[chosen])
        grid = np.zeros(runs * k)  # row: a run's terms (0 past its end: adds exactly)
        if runs == len(lengths):  # (every run: the terms in order)
            grid[np.arange(len(terms), dtype=np.int64) + shift] = terms
        else:
            at = np.flatnonzero(np.repeat(rows, lengths))
            grid[at + shift] = terms[at]
        with np.errstate(all="ignore"):  # (a run not finite is not verified: fsum's)
            total, carry, lost = _two_sum_rows(grid.reshape(runs, k).T)
            value = total + carry
            back = value - total  # TwoSum(total, carry): value + tail exactly
            tail = (total - (value - back)) + (carry - back)
            magnitude = np.abs(value)
            gap = magnitude - np.nextafter(magnitude, 0.0)  # the smaller gap around value
            sure = (lost == 0.0) | ((np.abs(tail) + lost * (1.0 + k * 2.0**-52)) * 2.0 < gap)
        sure &= np.isfinite(value) & (magnitude > 0.0)
        out[chosen[sure]] = value[sure]
        rows[chosen[~sure]] = False
    rest = np.flatnonzero(~rows)
    if len(rest):
        listed = terms.tolist()
        out[rest] = [math.fsum(listed[a:b]) for a, b in zip(starts[rest].tolist(), ends[rest].tolist())]
    return out


# --------------------------------------------------------------------------- binary probability sums
_EPS = float(np.finfo(np.float64).eps)  # scikit-learn's log_loss clipping for float64
_ONE_MINUS_EPS = 1.0 - _EPS
_copysign = math.copysign


def probability_terms(signed: np.ndarray, w: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Per-event log-loss and Brier terms of binary events given as *signed scores*: ``s`` for a
    positive, ``-s`` for a negative (``-0.0`` for a negative scored 0; scores in [0, 1]).

    ``p`` = the probability of the true class (``s`` or ``1 - s``) clipped to ``[eps, 1 - eps]``
    as scikit-learn clips; log-loss term ``w * -log(p)``, Brier term ``w * d**2`` with
    ``d = 1 - s`` or ``s``. One formula (:func:`log_p_and_brier`) for every batch path, so a
    term depends only on its event."""
    s = np.abs(signed)
    positive = np.empty(len(s), dtype=np.int64)
    np.logical_not(np.signbit(signed), out=positive, casting="unsafe")
    log_terms, brier_terms = np.empty_like(s), np.empty_like(s)
    log_p_and_brier(s, positive, log_terms, brier_terms)
    np.negative(log_terms, out=log_terms)
    if w is not None:
        log_terms *= w
        brier_terms *= w
    return log_terms, brier_terms


def log_p_and_brier(s: np.ndarray, positive: np.ndarray, log_p: np.ndarray, brier: np.ndarray) -> None:
    """The formula of the binary probability terms, for scores ``s`` in [0, 1] and ``positive``
    (0/1 of any integer or bool dtype, or a boolean view as uint8): writes ``log(p)`` (``<= 0``,
    ``p`` the probability of the true class, ``s`` or ``1 - s``, clipped to ``[eps, 1 - eps]``)
    into ``log_p`` and ``d**2`` (``d = 1 - s`` or ``s``) into ``brier``. ``p`` and ``d`` are
    chosen by their bits (``p = q ^ ((s ^ q) & -positive)``, ``d = s ^ ((s ^ q) & -positive)``
    with ``q = 1 - s``): each is exactly ``s`` or ``q``, as a select gives, at a third of
    ``np.where``'s cost."""
    q = np.subtract(1.0, s)
    mask = np.negative(positive, dtype=np.int64, casting="unsafe")
    sb, qb = s.view(np.int64), q.view(np.int64)
    pb, db = log_p.view(np.int64), brier.view(np.int64)
    np.bitwise_xor(sb, qb, out=pb)
    pb &= mask  # s ^ q for a positive, 0 for a negative
    np.bitwise_xor(sb, pb, out=db)  # d: q for a positive, s for a negative
    pb ^= qb  # p: s for a positive, q for a negative
    np.fmax(log_p, _EPS, out=log_p)  # np.clip's bits (no nan here), without its wrapper
    np.fmin(log_p, _ONE_MINUS_EPS, out=log_p)
    np.log(log_p, out=log_p)
    np.multiply(brier, brier, out=brier)


#: events per block of :func:`batch_probability_units` (its arrays stay in cache)
_BLOCK = 1 << 14
#: largest -log(p) of a clipped probability (-log(eps) = 36.04): level-1 sigma of unit weights
_LOG_TOP = 64.0


def batch_probability_units(
    s: np.ndarray, positive: np.ndarray, w: np.ndarray | None = None
) -> tuple[int, int] | None:
    """The exact sums of the log-loss and Brier terms of a batch (scores in [0, 1], ``positive``
    0/1, weights or None) in units of ``2**-1074``: :func:`log_p_and_brier` and three levels of
    :func:`exact_units_rows`' extraction per block of :data:`_BLOCK` events (the arrays stay in
    cache), with one fixed ``sigma`` per sum (``2**11`` times a bound on its terms: rows of
    :data:`_CHUNK` terms sum exactly in float64, so the level sums of every row share one unit
    and are added as ints once); what three levels leave (terms below ~``2**-82 sigma``,
    rare) goes through :func:`_row_units`. The same integers as summing
    :func:`probability_terms`; None when the terms may not be finite or the levels leave the
    float range (the caller sums :func:`probability_terms` then)."""
    n = len(s)
    top = 0.0 if not n else 1.0 if w is None else float(w.max())
    if not top > 0.0:
        return (0, 0)
    xs = [_frexp(_LOG_TOP * top)[1] + 11, _frexp(top)[1] + 11]  # sigma = 2**x >= 2**11 * max term
    if max(xs) >= 960 or min(xs) - 41 * 3 <= -960:
        return None
    sigma = np.array([[_ldexp(1.0, xs[0])], [_ldexp(1.0, xs[1])]])
    block = min(_BLOCK, -(-n // _CHUNK) * _CHUNK)
    rows_total = -(-n // _CHUNK)
    level_sums = np.empty((3, 2, rows_total))
    terms = np.empty((2, block))
    q = np.empty((2, block))
    left: list[list[np.ndarray]] = [[], []]
    for start in range(0, n, block):
        m = min(block, n - start)
        width = -(-m // _CHUNK) * _CHUNK
        a, qa = terms[:, :width], q[:, :width]
        log_p_and_brier(s[start : start + m], positive[start : start + m], terms[0, :m], terms[1, :m])
        if w is not None:
            a[:, :m] *= w[start : start + m]
        if m < width:
            a[:, m:] = 0.0
        r0 = start // _CHUNK
        level_sigma = sigma
        for level in range(3):
            np.add(a, level_sigma, out=qa)
            qa -= level_sigma  # exact: a multiple of ulp(sigma) / 2
            a -= qa
            level_sums[level, :, r0 : r0 + width // _CHUNK] = qa.reshape(2, -1, _CHUNK).sum(axis=2)
            level_sigma = level_sigma * _NEXT_LEVEL
        if a.any():  # terms too small for three levels: kept for one exact sum at the end
            for c in (0, 1):
                rest = a[c][a[c] != 0.0]
                if len(rest):
                    left[c].append(rest)
    out = []
    for c in (0, 1):
        total = _row_units(np.concatenate(left[c])) if left[c] else 0
        for level in range(3):
            x = xs[c] - 41 * level - 53  # the row sums are multiples of 2**x, below 2**(x + 53)
            ints = np.ldexp(level_sums[level, c], -x).astype(np.int64)
            shift = x + 1074
            for i in range(0, len(ints), 1024):  # (int64 sums of at most 1,024 rows: no overflow)
                total += int(ints[i : i + 1024].sum()) << shift
        out.append(total)
    return -out[0], out[1]


class ProbabilitySums:
    """Exact log-loss and Brier sums of binary events (:class:`BinaryScores`' state).

    Per event: unit-weight events append their signed score to :attr:`unit`, other events
    ``weight, signed score`` to :attr:`weighted` (a removal appends the negated weight: its
    terms cancel exactly); :meth:`fold` turns the buffers into terms
    (:func:`probability_terms`) and adds them to two :class:`ExactSum`. Callers fold once
    ``len(unit) + len(weighted) >= BUFFER``.

    >>> a = ProbabilitySums(); a.unit.extend([0.9, -0.2]); a.weighted.extend([2.0, 0.7])
    >>> b = ProbabilitySums().add_batch(np.array([0.9, -0.2, 0.7]), np.array([1.0, 1.0, 2.0]))
    >>> a.log.expansion() == b.log.expansion() and a.brier.value == b.brier.value
    True
    """

    __slots__ = ("unit", "weighted", "_log", "_brier")

    def __init__(self) -> None:
        self.unit: list[float] = []
        self.weighted: list[float] = []
        self._log = ExactSum()
        self._brier = ExactSum()

    def fold(self) -> "ProbabilitySums":
        unit, weighted = self.unit, self.weighted
        if len(unit) + len(weighted) // 2 <= SMALL:
            if unit or weighted:
                self._fold_small(unit, weighted)
            return self
        if unit:
            self._add(*probability_terms(as_array(unit)))
            unit.clear()
        if weighted:
            pairs = as_array(weighted)
            self._add(*probability_terms(pairs[1::2].copy(), pairs[0::2].copy()))
            weighted.clear()
        return self

    def _fold_small(self, unit: list[float], weighted: list[float]) -> None:
        """:meth:`fold` of a few buffered events in plain floats: the terms of
        :func:`probability_terms` by the same IEEE operations (numpy's ``log`` on one array,
        as there), summed by :func:`small_units`."""
        signed = unit + weighted[1::2]
        weights = weighted[0::2]
        n_unit = len(unit)
        ps, ds = [], []
        for x in signed:
            s = abs(x)
            q = 1.0 - s
            if _copysign(1.0, x) > 0.0:  # not np.signbit: p = s, d = 1 - s
                p, d = s, q
            else:
                p, d = q, s
            if p < _EPS:  # np.clip(p, eps, 1 - eps)
                p = _EPS
            elif p > _ONE_MINUS_EPS:
                p = _ONE_MINUS_EPS
            ps.append(p)
            ds.append(d * d)
        logs = (-np.log(np.array(ps, dtype=np.float64))).tolist()
        if weights:
            for i, w in enumerate(weights, n_unit):
                logs[i] *= w
                ds[i] *= w
        self._log._units += small_units(logs)
        self._brier._units += small_units(ds)
        unit.clear()
        weighted.clear()

    def add_batch(self, signed: np.ndarray, w: np.ndarray | None = None) -> "ProbabilitySums":
        """Add a batch of signed scores (and weights) exactly."""
        self._add(*probability_terms(np.ascontiguousarray(signed, dtype=np.float64), w))
        return self

    def add_scores(self, s: np.ndarray, positive: np.ndarray, w: np.ndarray | None = None) -> "ProbabilitySums":
        """Add a batch of scores in [0, 1] with their classes (``positive``: 0/1) exactly: the
        state :meth:`add_batch` of the signed scores gives (:func:`batch_probability_units`)."""
        units = batch_probability_units(s, positive, w)
        if units is None:
            signed = np.where(positive.view(bool) if positive.dtype == np.uint8 else positive != 0, s + 0.0, -(s + 0.0))
            return self.add_batch(signed, w)
        self._log._units += units[0]
        self._brier._units += units[1]
        return self

    def _add(self, log_terms: np.ndarray, brier_terms: np.ndarray) -> None:
        self._log._units += _row_units(log_terms)
        self._brier._units += _row_units(brier_terms)

    @property
    def log(self) -> ExactSum:
        """The exact sum of the log-loss terms (folded)."""
        self.fold()
        return self._log

    @property
    def brier(self) -> ExactSum:
        """The exact sum of the Brier terms (folded)."""
        self.fold()
        return self._brier

    def merge(self, other: "ProbabilitySums") -> "ProbabilitySums":
        self.log.merge(other.log)
        self.brier.merge(other.brier)
        return self

    def copy(self) -> "ProbabilitySums":
        out = ProbabilitySums()
        out._log, out._brier = self.log.copy(), self.brier.copy()
        return out

    @classmethod
    def from_parts(cls, log: ExactSum, brier: ExactSum) -> "ProbabilitySums":
        out = cls()
        out._log, out._brier = log, brier
        return out


# --------------------------------------------------------------------------- exact products
_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's splitter for float64


def two_product(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dekker's TwoProduct, vectorised: ``p + e == a * b`` exactly, ``p = fl(a * b)`` (for
    ``|a|, |b| < 2**996`` and products whose error term does not underflow; otherwise ``e`` is
    still a deterministic function of ``a`` and ``b``, so sums of it stay order-independent).

    >>> p, e = two_product(np.array([0.1]), np.array([0.1]))
    >>> from fractions import Fraction as F
    >>> F(p[0]) + F(e[0]) == F(0.1) * F(0.1)
    True
    """
    p = a * b
    c = _SPLIT * a
    ah = c - (c - a)
    al = a - ah
    c = _SPLIT * b
    bh = c - (c - b)
    bl = b - bh
    e = ((ah * bh - p) + ah * bl + al * bh) + al * bl
    return p, e


def fold_sums(sums: Sequence[ExactSum]) -> None:
    """:meth:`ExactSum.fold` of many sums in one vectorised pass (a window engine's small windows):
    their pending terms as rows zero-padded to the longest (zeros add nothing), summed by one
    :func:`exact_units_rows`; the same units as folding each alone. Sums whose terms are not all
    finite, or that hold more than :data:`BUFFER` terms, and subclasses (their terms are not the
    summands: ``LogLossSum``), fold alone.

    >>> a, b = ExactSum(), ExactSum()
    >>> a.terms.extend([0.1, 0.2]); b.terms.append(1e100)
    >>> fold_sums([a, b]); (a.terms, a.value, b.value)
    ([], 0.30000000000000004, 1e+100)
    """
    pending = [s for s in sums if s.terms]
    if len(pending) < 2 or any(s.__class__ is not ExactSum for s in pending):
        for s in pending:
            s.fold()
        return
    sizes = [len(s.terms) for s in pending]
    width = max(sizes)
    if width > BUFFER:
        for s in pending:
            s.fold()
        return
    flat = as_array([x for s in pending for x in s.terms])
    if not np.isfinite(flat).all():
        for s in pending:
            s.fold()
        return
    n = len(pending)
    starts = np.cumsum([0, *sizes[:-1]])
    padded = np.zeros((n, width))
    padded[np.repeat(np.arange(n), sizes), np.arange(len(flat)) - np.repeat(starts, sizes)] = flat
    for s, units in zip(pending, exact_units_rows(padded)):
        s._units += units
        s.terms.clear()


def add_rows(sums: list[ExactSum], rows: list[np.ndarray]) -> None:
    """Add each array of ``rows`` (one length) to the :class:`ExactSum` of the same index (one
    pass; a sum may appear more than once)."""
    a = np.stack(rows)
    if np.isfinite(a).all():
        for s, units in zip(sums, exact_units_rows(a)):
            s._units += units
    else:  # overflowed terms: each sum on its own (non-finite terms make it inf/nan)
        for s, row in zip(sums, a):
            s.add_array(row)


class LogLossSum(ExactSum):
    """The exact sum of log-loss terms ``w * -log(p)`` (``p`` already clipped): per event,
    :meth:`add_log` buffers ``(w, p)``; the fold computes every term with numpy's ``log`` (one
    formula for the per-event and batch paths, so a term depends only on its event).

    >>> a = LogLossSum(); _ = a.add_log(1.0, 0.25).add_log(2.0, 0.5)
    >>> b = LogLossSum().add_logs(np.array([2.0, 1.0]), np.array([0.5, 0.25]))
    >>> a == b, a.value == math.fsum([-math.log(0.25), 2.0 * -math.log(0.5)])
    (True, True)
    """

    __slots__ = ()

    def add_log(self, w: float, p: float) -> "LogLossSum":
        terms = self.terms
        terms += (w, p)
        if len(terms) >= 2 * BUFFER:
            self.fold()
        return self

    def add_logs(self, w: np.ndarray, p: np.ndarray) -> "LogLossSum":
        """Add ``w * -log(p)`` for arrays of weights and (clipped) probabilities."""
        self.add_array(w * -np.log(p))
        return self

    def fold(self) -> "LogLossSum":
        if self.terms:
            pairs = as_array(self.terms)
            self.terms.clear()
            self.add_logs(pairs[0::2], pairs[1::2])
        return self
