"""Score -> bin mappings for the score histograms of :mod:`streammetrics.kernels.histogram`.

A *binning* maps every finite float64 score to a key such that ``s1 <= s2`` implies
``key(s1) <= key(s2)``: the order of scores is kept up to ties inside a bin, which is
all ranking metrics (ROC AUC, curves, average precision) need.

:class:`LogGridBinning` (the default) is fixed and data-independent, so histograms built
on any split of a stream merge by adding counts. It needs no configuration for any
finite score:

* ``0.0`` and ``1.0`` get bins of their own: saturated sigmoids are real ties;
* in ``(0, 0.5)`` the grid is log-relative in ``s`` and in ``[0.5, 1)`` log-relative in
  ``1 - s``: with ``bins`` bins per octave a bin spans at most ``1/bins`` of the
  distance to the nearest of 0 and 1, i.e. at most ``2/bins`` in log-odds
  (``logit(s) = log s - log(1 - s)``) however crowded the scores are near 0 or 1;
  ``1 - 1e-12`` and ``1 - 2e-12`` fall in different bins;
* below 0 and above 1 (unbounded margins) the grid is log-relative in ``|s|`` (as in
  DDSketch): a bin spans at most ``1/bins`` of ``|s|``.

The key is read off the IEEE-754 bits of ``s`` (or of ``1 - s``, computed exactly for
``s`` in ``[0.5, 1]``) - exponent and top ``log2(bins)`` mantissa bits, rounded up - so
it is computed exactly, with no transcendental function, by pure Python per event and
by numpy per batch alike: both give the same key for every float, and the mapping is
exactly monotone. At most ``6139 * bins`` keys exist, so the state is bounded; the grids
for ``bins`` and ``bins // 2`` are nested (:meth:`LogGridBinning.coarsen_keys`), which lets
accumulators trade resolution for memory (:func:`streammetrics.kernels.histogram.collapse`).

:class:`ExactBinning` keeps every distinct score (the key is the score itself).
"""
from __future__ import annotations

import struct
from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["Binning", "LogGridBinning", "ExactBinning", "make_binning", "grid_budget", "binning_from_config",
           "MAX_OCTAVES", "bit_views"]

_MASK = 0x7FFF_FFFF_FFFF_FFFF  # clears the sign bit (maps -0.0 to +0.0)
_DBL_MAX = 1.7976931348623157e308
_CHUNK = 1 << 15  # batch work is done in cache-sized blocks
_ROUND52 = (1 << 52) - 1
_INF_BITS = 0x7FF0_0000_0000_0000
#: the coarsest grid's bins span this many octaves (``x`` in ``(0, 2]`` is one bin: inside
#: [0, 1] its keys are 0.0, (0, 0.5), [0.5, 1) and 1.0; 8 keys in all)
MAX_OCTAVES = 1 << 10


def bit_views() -> tuple[Any, Any]:  # memoryviews of formats "d" and "q" (typeshed types items as int)
    """An 8-byte buffer seen as one float64 and as one int64: ``f[0] = x; i[0]`` is the bits of
    ``x`` (half the cost of ``struct`` pack + unpack), from which per-event paths compute
    :meth:`LogGridBinning.key` inline. One per accumulator state (the fast-path tuples hold
    it), so threads updating different accumulators never share one."""
    buf = bytearray(8)
    return memoryview(buf).cast("d"), memoryview(buf).cast("q")


class Binning:
    """Interface of a monotone score -> key mapping (see the module docstring)."""

    #: ``"log_grid"`` or ``"exact"``; written to the config of accumulators
    kind: str = ""
    #: True when every key holds a single distinct score (no within-bin ties possible)
    exact: bool = False
    #: per-event mapping ``key(score)`` for a finite float ``score`` (not validated)
    key: Callable[[float], Any]

    def keys(self, scores: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """Vectorised :attr:`key` on a validated finite float64 array."""
        raise NotImplementedError

    def lowest(self, keys: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """The smallest score mapped to each key: ``score >= lowest(k)`` iff ``key(score) >= k``."""
        raise NotImplementedError

    def singleton(self, keys: np.ndarray) -> np.ndarray:  # pragma: no cover - interface
        """Boolean mask of keys that only one distinct score can map to."""
        raise NotImplementedError

    def check_keys(self, keys: np.ndarray, name: str) -> None:  # pragma: no cover - interface
        """Raise ValueError unless ``keys`` (loaded from a dict) are keys of this binning."""
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        return {"bins": getattr(self, "bins", None), "exact": self.exact}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Binning) and self.config() == other.config()

    def __hash__(self) -> int:
        return hash(tuple(sorted(self.config().items())))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config()!r})"


class LogGridBinning(Binning):
    """Fixed log-relative grid with ``bins`` bins per octave (a power of two, 1..2**20).

    With ``x = min(|s|, |1 - s|)`` (the distance to the nearest of 0 and 1, and ``-s``
    below 0) and ``up(x) = ceil(bits(x) / 2**(52 - log2(bins)))``, the int key is

    ==================  ================================  ==========================
    score               key                               notes
    ==================  ================================  ==========================
    ``s < 0``           ``-up(-s)``                       ``<= -1``
    ``0 <= s < 0.5``    ``up(s)``                         ``0`` only for ``s == 0``
    ``0.5 <= s <= 1``   ``C - up(1 - s)``                 ``C`` only for ``s == 1``
    ``s > 1``           ``C + up(s - 1)``                 ``>= C + 1``
    ==================  ================================  ==========================

    with ``C = 2 * up(0.5) + 1``. ``1 - s`` is exact on ``[0.5, 1]`` and ``s - 1`` is
    monotone, so the key is exactly monotone in ``s``. ``up(x) = (bits(x) + rounding) >> shift``;
    ``half_key = up(0.5)`` and ``one_key = C`` (read by the per-event paths that inline the key).
    """

    kind = "log_grid"
    exact = False

    def __init__(self, bins: int = 64, octaves: int = 1) -> None:
        if type(bins) is not int:
            raise TypeError(f"bins must be an int (bins per octave), got {bins!r}")
        if not 1 <= bins <= 1 << 20 or bins & (bins - 1):
            raise ValueError(f"bins must be a power of two between 1 and 2**20, got {bins!r}")
        if type(octaves) is not int or not 1 <= octaves <= MAX_OCTAVES or octaves & (octaves - 1):
            raise ValueError(f"octaves must be a power of two between 1 and {MAX_OCTAVES}, got {octaves!r}")
        if octaves > 1 and bins > 1:
            raise ValueError("a bin spans several octaves only on the grid with 1 bin per octave")
        self.bins = bins
        self.octaves = octaves
        m = bins.bit_length() - 1
        j = octaves.bit_length() - 1
        self.shift = shift = 52 - m + j
        self.rounding = rnd = (1 << shift) - 1
        self.half_key = -(-(1022 << m) >> j)  # up(0.5) = ceil(2**52 * 1022 / 2**shift)
        self.one_key = c = 2 * self.half_key + 1  # key of 1.0
        top = -(-(2047 << m) >> j)  # up(largest finite float)
        self.min_key = -top
        self.max_key = c + top
        pack = struct.Struct("<d").pack
        unpack = struct.Struct("<q").unpack
        mask = _MASK

        def key(s: float) -> int:
            """Key of a finite float score (pure Python, exact)."""
            if 0.0 <= s < 0.5:
                return ((unpack(pack(s))[0] & mask) + rnd) >> shift
            if 0.5 <= s <= 1.0:
                return c - ((unpack(pack(1.0 - s))[0] + rnd) >> shift)
            if s > 1.0:
                return c + ((unpack(pack(s - 1.0))[0] + rnd) >> shift)
            return -((unpack(pack(-s))[0] + rnd) >> shift)

        self.key = key

    @property
    def per_octave(self) -> float:
        """Bins per octave: ``bins``, or ``1 / octaves`` when a bin spans several octaves."""
        return self.bins if self.octaves == 1 else 1.0 / self.octaves

    def config(self) -> dict[str, Any]:
        if self.octaves == 1:
            return {"bins": self.bins, "exact": False}
        return {"bins": self.bins, "exact": False, "octaves": self.octaves}

    # ------------------------------------------------------------------ batches
    def keys(self, scores: np.ndarray) -> np.ndarray:
        n = len(scores)
        out = np.empty(n, dtype=np.int64)
        for start in range(0, n, _CHUNK):
            s = scores[start : start + _CHUNK]
            o = out[start : start + _CHUNK]
            if s.min() >= 0.0 and s.max() <= 1.0:
                self._keys_unit(s, o)
            else:
                self._keys_any(s, o)
        return out

    def _up(self, x: np.ndarray) -> np.ndarray:
        """up(x) in place on a float64 array of non-negative values (returned as int64 view)."""
        b = x.view(np.int64)
        b &= _MASK
        if self.shift <= 52:
            b += self.rounding
            b >>= self.shift
        else:  # in two steps: bits + 2**shift - 1 could overflow int64 (ceil of a ceil)
            b += _ROUND52
            b >>= 52
            b += self.octaves - 1
            b >>= self.shift - 52
        return b

    def _keys_unit(self, s: np.ndarray, out: np.ndarray) -> None:
        # scores in [0, 1]: min(s, 1 - s) is s below 0.5 and (exactly) 1 - s from 0.5 on
        x = np.subtract(1.0, s)
        np.minimum(x, s, out=x)
        b = self._up(x)
        # out = b below 0.5 and C - b from 0.5 on: with flip = 0 or -1,
        # (b ^ flip) - flip * (C + 1) is b or (-b - 1) + C + 1
        flip = (s >= 0.5).view(np.int8).astype(np.int64)
        np.negative(flip, out=flip)
        np.bitwise_xor(b, flip, out=out)
        flip *= self.one_key + 1
        out -= flip

    def _keys_any(self, s: np.ndarray, out: np.ndarray) -> None:
        # x = min(|s|, |1 - s|): -s below 0, s on [0, 0.5), 1 - s on [0.5, 1], s - 1 above 1
        x = np.subtract(1.0, s)
        np.abs(x, out=x)
        np.minimum(x, np.abs(s), out=x)
        b = self._up(x)
        upper = s >= 0.5
        # sign -1 below 0 and on [0.5, 1]; offset C from 0.5 on
        flip = (s < 0.0) | (upper & (s <= 1.0))
        flip = flip.view(np.int8).astype(np.int64)
        np.negative(flip, out=flip)
        np.bitwise_xor(b, flip, out=out)
        out -= flip
        out += upper.view(np.int8) * np.int64(self.one_key)

    # ------------------------------------------------------------------ inverse
    def _edge(self, up: np.ndarray) -> np.ndarray:
        """Upper edge of the x-bin ``up`` (the bins are ``(edge(up - 1), edge(up)]``)."""
        # in uint64 (below 2**64 for every key), capped at the bits of inf
        bits = np.asarray(up, dtype=np.int64).astype(np.uint64) << np.uint64(self.shift)
        return np.minimum(bits, np.uint64(_INF_BITS)).view(np.float64)

    def lowest(self, keys: np.ndarray) -> np.ndarray:
        k = np.asarray(keys, dtype=np.int64)
        out = np.empty(len(k), dtype=np.float64)
        c = self.one_key
        neg = k < 0
        low = (k >= 0) & (k <= self.half_key)
        mid = (k > self.half_key) & (k <= c)
        high = k > c
        # s < 0: s in [-edge(up), -edge(up - 1))
        out[neg] = -np.minimum(self._edge(-k[neg]), _DBL_MAX)
        # 0 <= s < 0.5: s in (edge(up - 1), edge(up)]: the float after the lower edge
        up = k[low]
        out[low] = np.where(up > 0, np.nextafter(self._edge(np.maximum(up - 1, 0)), 1.0), 0.0)
        # 0.5 <= s <= 1: s = 1 - u with u a multiple of 2**-53 in (0, 0.5]; largest u in the bin
        u = np.minimum(np.floor(np.ldexp(self._edge(c - k[mid]), 53)), 2.0**52)
        out[mid] = 1.0 - np.ldexp(u, -53)
        # s > 1: smallest s with s - 1 above the lower edge (s - 1 rounds; fixed below)
        out[high] = 1.0 + np.nextafter(self._edge(k[high] - c - 1), 1.0)
        return self._settle(out, k)

    def _settle(self, out: np.ndarray, k: np.ndarray) -> np.ndarray:
        """Move each candidate to the smallest float whose key is ``k`` (a few ulps at most);
        ValueError for keys that no float maps to."""
        with np.errstate(over="ignore"):
            return self._settle_loop(out, k)

    def _settle_loop(self, out: np.ndarray, k: np.ndarray) -> np.ndarray:
        for _ in range(16):
            kk = self.keys(out)
            too_low = kk < k
            below = np.nextafter(out, -np.inf)
            finite = np.isfinite(below)
            lower_ok = (kk == k) & finite
            lower_ok[lower_ok] = self.keys(below[lower_ok]) == k[lower_ok]
            if not lower_ok.any() and not too_low.any():
                break
            out = np.where(lower_ok, below, np.where(too_low, np.nextafter(out, np.inf), out))
        if not np.array_equal(self.keys(out), k):
            bad = int(np.argmax(self.keys(out) != k))
            raise ValueError(f"no score maps to key {int(k[bad])}")
        return out

    def singleton(self, keys: np.ndarray) -> np.ndarray:
        k = np.asarray(keys, dtype=np.int64)
        c = self.one_key
        out = (k == 0) | (k == c)
        # s = 1 - j * 2**-53 on [0.5, 1) and s = 1 + j * 2**-52 on (1, 2): x-bins no wider
        # than that spacing hold at most one score
        for region, up, spacing in (
            ((k > self.half_key) & (k < c), c - k, 2.0**-53),
            (k > c, k - c, 2.0**-52),
        ):
            u = up[region]
            out[region] = self._edge(u) - self._edge(u - 1) <= spacing
        return out

    def __reduce__(self) -> tuple:  # the per-event ``key`` closure is rebuilt, not pickled
        return (LogGridBinning, (self.bins, self.octaves))

    @property
    def coarsest(self) -> bool:
        """True for the grid with 1 bin per :data:`MAX_OCTAVES` octaves (no coarser one)."""
        return self.octaves == MAX_OCTAVES

    def coarser(self) -> "LogGridBinning":
        """The grid with half as many bins per octave (below 1 bin per octave: bins twice
        as many octaves wide): each of its bins is the union of two adjacent bins of this
        one (the grids are nested)."""
        if self.bins > 1:
            return LogGridBinning(self.bins // 2)
        if self.coarsest:
            raise ValueError(f"a grid with bins of {MAX_OCTAVES} octaves cannot be coarsened")
        return LogGridBinning(1, self.octaves * 2)

    def coarsen_keys(self, keys: np.ndarray) -> np.ndarray:
        """Keys of :meth:`coarser` for the scores of ``keys``: ``coarser().key(s)`` from
        ``self.key(s)``, exactly, since ``ceil(ceil(a / 2**S) / 2) == ceil(a / 2**(S + 1))``."""
        k = np.asarray(keys, dtype=np.int64)
        c, c2 = self.one_key, self.coarser().one_key
        out = np.empty_like(k)
        neg = k < 0
        low = (k >= 0) & (k <= self.half_key)
        mid = (k > self.half_key) & (k <= c)
        high = k > c
        out[neg] = -((-k[neg] + 1) >> 1)
        out[low] = (k[low] + 1) >> 1
        out[mid] = c2 - ((c - k[mid] + 1) >> 1)
        out[high] = c2 + ((k[high] - c + 1) >> 1)
        return out

    def check_keys(self, keys: np.ndarray, name: str) -> None:
        if len(keys) == 0:
            return
        if keys.min() < self.min_key or keys.max() > self.max_key:
            raise ValueError(f"{name} holds keys outside [{self.min_key}, {self.max_key}]")
        try:
            self.lowest(keys)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None


class ExactBinning(Binning):
    """Identity mapping: the key is the float score itself (``-0.0`` read as ``0.0``)."""

    kind = "exact"
    exact = True
    bins = None

    def __init__(self) -> None:
        self.key = _exact_key

    def __reduce__(self) -> tuple:
        return (ExactBinning, ())

    def keys(self, scores: np.ndarray) -> np.ndarray:
        return np.asarray(scores, dtype=np.float64) + 0.0

    def lowest(self, keys: np.ndarray) -> np.ndarray:
        return np.asarray(keys, dtype=np.float64)

    def singleton(self, keys: np.ndarray) -> np.ndarray:
        return np.ones(len(keys), dtype=bool)

    def check_keys(self, keys: np.ndarray, name: str) -> None:
        if len(keys) and not np.isfinite(keys).all():
            bad = int(np.argmax(~np.isfinite(keys)))
            raise ValueError(f"{name}[{bad}] must be a finite score, got {keys[bad]!r}")


def _exact_key(s: float) -> float:
    return s + 0.0


def make_binning(bins: int = 64, exact: bool = False) -> Binning:
    """The binning for the constructor arguments ``bins`` / ``exact`` of score accumulators."""
    if type(exact) is not bool:
        raise TypeError(f"exact must be a bool, got {exact!r}")
    return ExactBinning() if exact else LogGridBinning(bins)


def grid_budget(bins: int | None, exact: bool, max_bins: Any) -> tuple[int | None, int | None]:
    """``(finest grid, max_bins)`` of a score accumulator: ``(None, None)`` when exact, else
    ``bins`` and ``max_bins`` checked (an int, at least 1)."""
    if exact:
        return None, None
    if type(max_bins) is not int:
        raise TypeError(f"max_bins must be an int, got {max_bins!r}")
    if max_bins < 1:
        raise ValueError(f"max_bins must be at least 1, got {max_bins!r}")
    return bins, max_bins


def binning_from_config(config: Mapping[str, Any]) -> Binning:
    """Inverse of :meth:`Binning.config` (``ValueError`` if malformed)."""
    if not isinstance(config, Mapping) or set(config) != {"bins", "exact"}:
        raise ValueError(f"binning config must be {{'bins', 'exact'}}, got {config!r}")
    if config["exact"] is True:
        if config["bins"] is not None:
            raise ValueError("an exact binning has bins=None")
        return ExactBinning()
    try:
        return make_binning(config["bins"], config["exact"])
    except TypeError as exc:
        raise ValueError(str(exc)) from None

