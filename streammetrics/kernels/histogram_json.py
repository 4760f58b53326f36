"""JSON forms of score histograms (issue 12, state encoding).

``histograms_to_json`` for small histograms in plain Python, and the packed form of a set
of many histograms sharing one binning (:func:`pack_flat` / :func:`unpack_flat`).

:func:`streammetrics.kernels.histogram.histograms_to_json` aligns the histograms through
numpy (``aligned``, ``np.diff``, ``_compact``): ~50 us of array set-up whatever the size,
which is most of a 10-event window's ``to_dict``. :func:`small_histograms_to_json` writes
the identical dict (same keys, same lists, ints where the weights are whole) from the
``{key: weight}`` dicts directly; callers use it up to :data:`SMALL_KEYS` keys.

Weights in units (exact sums, :mod:`streammetrics.kernels.exact_weights`) are written as their
correctly rounded floats, plus the residues of those that are not exact under ``"residues"``
(the key is absent when there are none).

>>> small_histograms_to_json([{3: 1.0, 10: 2.5}, {10: 1.0}], ["neg", "pos"], exact=False)
{'key_deltas': [3, 7], 'neg': [1, 2.5], 'pos': [0, 1]}
"""
from __future__ import annotations

import struct
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from streammetrics.core.state import (
    describe,
    from_base64,
    pack_floats,
    pack_uints,
    to_base64,
    unpack_floats,
    unpack_uints,
    unzigzag,
    zigzag,
)
from streammetrics.kernels.exact_weights import decode_residues, encode_residues, units_of, value_of

__all__ = ["SMALL_KEYS", "small_histograms_to_json", "PACKED_FORMAT", "ZLIB_FROM", "pack_flat", "pack_dicts",
           "unpack_flat"]

#: up to this many keys (all histograms together) the plain-Python encoding is used
SMALL_KEYS = 256

_INT_LIMIT = 2.0**53


def small_histograms_to_json(weights: Sequence[Mapping], names: Sequence[str], exact: bool) -> dict[str, Any]:
    """``{"key_deltas" | "scores": [...], names[i]: [...]}`` of histograms given as their
    ``{key: weight}`` dicts: the same dict ``histograms_to_json`` returns for them."""
    union: set = set()
    for w in weights:
        union.update(w)
    keys = sorted(union)
    out: dict[str, Any]
    if exact:
        out = {"scores": [float(k) for k in keys]}
    else:
        deltas, prev = [], 0
        for k in keys:
            deltas.append(int(k) - prev)
            prev = int(k)
        out = {"key_deltas": deltas}
    limit = _INT_LIMIT
    residues = {}
    for name, w in zip(names, weights):
        get = w.get
        values = [get(k, 0.0) for k in keys]
        if w and next(iter(w.values())).__class__ is int:  # units mode (a set is in one mode)
            r = encode_residues(values)
            if r is not None:
                residues[name] = r
            values = [value_of(v) if v.__class__ is int else v for v in values]
        # as histogram._compact: whole weights below 2**53 as ints, others as floats
        out[name] = [int(v) if v.is_integer() and -limit < v < limit else v for v in values]
    if residues:
        out["residues"] = residues
    return out


# ----------------------------------------------------------------------------- packed sets
#: version of the packed form written under ``"packed"``
PACKED_FORMAT = 1
_MAX_KEY_DELTA = 1 << 40  # log-grid keys lie within +-2**33 (2**20 bins per octave)
_VARINT = 10  # bytes of a 64-bit varint at most
#: packed data of at least this many bytes is zlib-compressed (when that makes it smaller)
ZLIB_FROM = 256


def pack_flat(flat: tuple[np.ndarray, np.ndarray, np.ndarray], n_hists: int, exact: bool) -> dict[str, Any]:
    """The packed JSON form of ``n_hists`` histograms given flat (``ids``, ``keys``,
    ``weights`` sorted by id then key; see ``kernels.histogram.flatten``)::

        {"packed": 1, "entries": n,
         "keys": "key_deltas" | "scores", "weights": "counts" | "float64",
         "lengths": [bytes of sizes, bytes of keys, bytes of weights],
         "zlib": bool, "data": base64 of the three arrays, one after the other}

    ``sizes``: varints, the entries of each histogram in order; keys: ``"key_deltas"``
    (log grid) zig-zag varints of each key minus the previous entry's key, ``"scores"``
    (exact) float64; weights: ``"counts"`` varints when every weight is a whole number
    below 2**53, else float64 (see ``core.state``). Data of at least :data:`ZLIB_FROM`
    bytes is zlib-compressed when that makes it smaller. With unit weights a log-grid entry
    costs about 2 bytes before compression and base64 (4/3), an exact one about 9.

    >>> flat = (np.array([0, 0, 2]), np.array([5, 9, 7]), np.array([1.0, 2.0, 1.0]))
    >>> pack_flat(flat, 3, exact=False)["data"]
    'AgABCggDAQIB'
    """
    ids, keys, weights = flat
    residues = None
    if weights.dtype == object:  # units mode: the rounded floats, and the residues apart
        units = weights.tolist()
        residues = encode_residues(units)
        weights = np.array([value_of(u) for u in units], dtype=np.float64)
    sizes = pack_uints(np.bincount(ids, minlength=n_hists))
    key_bytes = pack_floats(keys) if exact else pack_uints(zigzag(np.diff(keys, prepend=0)))
    if len(weights) and not (np.all(weights == np.floor(weights)) and float(weights.max()) < _INT_LIMIT):
        kind, weight_bytes = "float64", pack_floats(weights)
    else:
        kind, weight_bytes = "counts", pack_uints(weights.astype(np.uint64))
    out = _packed(len(ids), exact, kind, sizes, key_bytes, weight_bytes)
    if residues is not None:
        out["residues"] = residues
    return out


def _packed(entries: int, exact: bool, kind: str, sizes: bytes, key_bytes: bytes, weight_bytes: bytes) -> dict:
    """The packed dict of :func:`pack_flat` from its three byte arrays."""
    raw = sizes + key_bytes + weight_bytes
    packed = zlib.compress(raw, 6) if len(raw) >= ZLIB_FROM else raw
    compressed = len(packed) < len(raw)
    return {
        "packed": PACKED_FORMAT,
        "entries": entries,
        "keys": "scores" if exact else "key_deltas",
        "weights": kind,
        "lengths": [len(sizes), len(key_bytes), len(weight_bytes)],
        "zlib": compressed,
        "data": to_base64(packed if compressed else raw),
    }


def pack_dicts(weights: Sequence[Mapping], exact: bool) -> dict[str, Any]:
    """:func:`pack_flat` of histograms given as their ``{key: weight}`` dicts (histogram
    ``i`` is ``weights[i]``): the same dict, built in plain Python up to :data:`SMALL_KEYS`
    entries (a small window's ``to_dict`` then pays no array set-up), with numpy beyond.

    >>> pack_dicts([{9: 2.0, 5: 1.0}, {}, {7: 1.0}], exact=False)["data"]
    'AgABCggDAQIB'
    """
    sizes = [len(w) for w in weights]
    n = sum(sizes)
    units = any(next(iter(w.values())).__class__ is int for w in weights if w)  # (a set is in one mode)
    if n > SMALL_KEYS or units:
        from itertools import chain

        dtype = np.float64 if exact else np.int64
        keys = np.fromiter(chain.from_iterable(w.keys() for w in weights), dtype=dtype, count=n)
        values = np.fromiter(chain.from_iterable(w.values() for w in weights), dtype=object if units else np.float64,
                             count=n)
        ids = np.repeat(np.arange(len(weights), dtype=np.int64), sizes)
        order = np.lexsort((keys, ids))
        return pack_flat((ids, keys[order], values[order]), len(weights), exact)
    keys_list: list = []
    values_list: list[float] = []
    for w in weights:
        if w:
            for k in sorted(w):
                keys_list.append(k)
                values_list.append(w[k])
    size_bytes = _uvarints(sizes)
    if exact:
        key_bytes = struct.pack(f"<{n}d", *keys_list)
    else:
        prev, codes = 0, []
        for k in keys_list:
            d = int(k) - prev
            prev = int(k)
            codes.append(2 * d if d >= 0 else -2 * d - 1)
        key_bytes = _uvarints(codes)
    if all(v.is_integer() and v < _INT_LIMIT for v in values_list):
        kind, weight_bytes = "counts", _uvarints([int(v) for v in values_list])
    else:
        kind, weight_bytes = "float64", struct.pack(f"<{n}d", *values_list)
    return _packed(n, exact, kind, size_bytes, key_bytes, weight_bytes)


def _uvarints(values: Sequence[int]) -> bytes:
    """LEB128 varints of non-negative ints in plain Python (``core.state.pack_uints``)."""
    out = bytearray()
    append = out.append
    for v in values:
        while v >= 0x80:
            append((v & 0x7F) | 0x80)
            v >>= 7
        append(v)
    return bytes(out)


_FIELDS = {"packed", "entries", "keys", "weights", "lengths", "zlib", "data"}
_OPTIONAL = {"residues"}


def unpack_flat(
    data: Any, n_hists: int, exact: bool, max_entries: int, positive: bool = True, exact_weights: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_flat`, validated: ``ValueError`` on anything malformed, and
    before decoding anything when the declared entries exceed ``max_entries`` or a length
    exceeds what the entries allow (compressed data is inflated to at most the declared
    lengths). Keys are checked ascending within each histogram (the caller checks them
    against its binning); weights finite, and > 0 when ``positive``. Weights are float64, or
    with ``exact_weights``, exact units (an object array of ints) when a residue is present or
    a weight is not whole (units mode, :mod:`streammetrics.kernels.exact_weights`); without it,
    floats, and residues are refused."""
    if not isinstance(data, Mapping):
        raise ValueError(f"must be a packed mapping, got {describe(data)}")
    if not _FIELDS <= set(data) <= _FIELDS | _OPTIONAL:
        raise ValueError(f"keys must be {sorted(_FIELDS)} (and 'residues'), got {sorted(map(str, data))[:8]}")
    if data["packed"] != PACKED_FORMAT or type(data["packed"]) is not int:
        raise ValueError(f"packed format {describe(data['packed'])} is not {PACKED_FORMAT}")
    n = data["entries"]
    if type(n) is not int or not 0 <= n <= max_entries:
        raise ValueError(f"entries must be an int in [0, {max_entries}], got {describe(n)}")
    key_field = "scores" if exact else "key_deltas"
    if data["keys"] != key_field or data["weights"] not in ("counts", "float64") or type(data["zlib"]) is not bool:
        raise ValueError(f"keys must be {key_field!r}, weights 'counts' or 'float64', zlib a bool")
    lengths = data["lengths"]
    caps = [_VARINT * n_hists, (8 if exact else _VARINT) * n, (8 if data["weights"] == "float64" else _VARINT) * n]
    if not (isinstance(lengths, list) and len(lengths) == 3
            and all(type(v) is int and 0 <= v <= cap for v, cap in zip(lengths, caps))):
        raise ValueError(f"lengths must be 3 byte counts within {caps}, got {describe(lengths)}")
    total = sum(lengths)
    if data["zlib"]:
        raw = _inflate(from_base64(data["data"], total + total // 100 + 64, "data"), total)
    else:
        raw = from_base64(data["data"], total, "data")
    if len(raw) != total:
        raise ValueError(f"data holds {len(raw)} bytes, lengths say {total}")
    a, b = lengths[0], lengths[0] + lengths[1]
    sizes = unpack_uints(raw[:a], n_hists, "sizes")
    if int(sizes.sum(dtype=np.float64)) != n or (sizes > np.uint64(n)).any():
        raise ValueError(f"sizes do not add up to entries={n}")
    if exact:
        keys = unpack_floats(raw[a:b], n, "scores") + 0.0
    else:
        deltas = unzigzag(unpack_uints(raw[a:b], n, "key_deltas"))
        if n and int(np.abs(deltas).max()) > _MAX_KEY_DELTA:
            raise ValueError("key_deltas out of range")
        keys = np.cumsum(deltas)
    starts = np.zeros(n, dtype=bool)
    counts_per = sizes.astype(np.int64)
    firsts = np.cumsum(counts_per) - counts_per
    starts[firsts[counts_per > 0]] = True
    if n > 1 and not (np.diff(keys) > 0)[~starts[1:]].all():
        raise ValueError(f"{key_field} must give strictly ascending keys within each histogram")
    if data["weights"] == "float64":
        weights = unpack_floats(raw[b:], n, "weights")
        if n and weights.min() < 0:
            raise ValueError("weights must be non-negative")
    else:
        counts = unpack_uints(raw[b:], n, "counts")
        if n and counts.max() >= np.uint64(1 << 53):
            raise ValueError("counts must be below 2**53")
        weights = counts.astype(np.float64)
    if positive and n and not weights.min() > 0:
        raise ValueError("every stored weight must be positive")
    ids = np.repeat(np.arange(n_hists, dtype=np.int64), counts_per)
    residues = data.get("residues")
    if residues is not None and not exact_weights:
        raise ValueError("residues are not accepted here (no exact weight sums)")
    if exact_weights and (residues is not None
                          or (data["weights"] == "float64" and not bool(np.all(weights == np.floor(weights))))):
        values = weights.tolist()
        exact_units = decode_residues(residues, values, "residues")
        units = np.empty(n, dtype=object)
        units[:] = exact_units if exact_units is not None else [units_of(v) for v in values]
        return ids, keys, units
    return ids, keys, weights


def _inflate(data: bytes, size: int) -> bytes:
    """zlib-decompress ``data`` that must inflate to exactly ``size`` bytes (never more is
    produced: a hostile stream cannot make it allocate beyond ``size + 1``)."""
    d = zlib.decompressobj()
    try:
        out = d.decompress(data, size + 1)
    except zlib.error as exc:
        raise ValueError(f"data is not a valid zlib stream ({exc})") from None
    if len(out) != size or not d.eof or d.unconsumed_tail or d.unused_data:
        raise ValueError(f"data does not inflate to the {size} bytes its lengths declare")
    return out
