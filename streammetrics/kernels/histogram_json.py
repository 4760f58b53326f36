"""JSON forms of score histograms (issue 12, state encoding).

``histograms_to_json`` for small histograms in plain Python, and the packed form of a set
of many histograms sharing one binning (:func:`pack_flat` / :func:`unpack_flat`).

:func:`streammetrics.kernels.histogram.histograms_to_json` aligns the histograms through
numpy (``aligned``, ``np.diff``, ``_compact``): ~50 us of array set-up whatever the size,
which is most of a 10-event window's ``to_dict``. :func:`small_histograms_to_json` writes
the identical dict (same keys, same lists, ints where the weights are whole) from the
``{key: weight}`` dicts directly; callers use it up to :data:`SMALL_KEYS` keys.

>>> small_histograms_to_json([{3: 1.0, 10: 2.5}, {10: 1.0}], ["neg", "pos"], exact=False)
{'key_deltas': [3, 7], 'neg': [1, 2.5], 'pos': [0, 1]}
"""
from __future__ import annotations

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

__all__ = ["SMALL_KEYS", "small_histograms_to_json", "PACKED_FORMAT", "pack_flat", "unpack_flat"]

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
    for name, w in zip(names, weights):
        get = w.get
        # as histogram._compact: whole weights below 2**53 as ints, others as floats
        out[name] = [int(v) if v.is_integer() and -limit < v < limit else v
                     for v in [float(get(k, 0.0)) for k in keys]]
    return out


# ----------------------------------------------------------------------------- packed sets
#: version of the packed form written under ``"packed"``
PACKED_FORMAT = 1
_MAX_KEY_DELTA = 1 << 40  # log-grid keys lie within +-2**33 (2**20 bins per octave)


def pack_flat(flat: tuple[np.ndarray, np.ndarray, np.ndarray], n_hists: int, exact: bool) -> dict[str, Any]:
    """The packed JSON form of ``n_hists`` histograms given flat (``ids``, ``keys``,
    ``weights`` sorted by id then key; see ``kernels.histogram.flatten``)::

        {"packed": 1, "entries": n,
         "sizes": varints: entries per histogram, in order,
         "key_deltas": zig-zag varints of each key minus the previous entry's key (log grid)
           | "scores": float64 of the keys (exact scores),
         "counts": varints (every weight a whole number below 2**53)
           | "weights": float64}

    each array as base64 text (see ``core.state``). With unit weights a log-grid entry
    costs about 2 bytes before base64 (4/3 after), an exact one about 9.

    >>> flat = (np.array([0, 0, 2]), np.array([5, 9, 7]), np.array([1.0, 2.0, 1.0]))
    >>> pack_flat(flat, 3, exact=False)
    {'packed': 1, 'entries': 3, 'sizes': 'AgAB', 'key_deltas': 'CggD', 'counts': 'AQIB'}
    """
    ids, keys, weights = flat
    out: dict[str, Any] = {
        "packed": PACKED_FORMAT,
        "entries": len(ids),
        "sizes": to_base64(pack_uints(np.bincount(ids, minlength=n_hists))),
    }
    if exact:
        out["scores"] = to_base64(pack_floats(keys))
    else:
        out["key_deltas"] = to_base64(pack_uints(zigzag(np.diff(keys, prepend=0))))
    if len(weights) and not (np.all(weights == np.floor(weights)) and float(weights.max()) < _INT_LIMIT):
        out["weights"] = to_base64(pack_floats(weights))
    else:
        out["counts"] = to_base64(pack_uints(weights.astype(np.uint64)))
    return out


def unpack_flat(
    data: Any, n_hists: int, exact: bool, max_entries: int, positive: bool = True
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Inverse of :func:`pack_flat`, validated: ``ValueError`` on anything malformed, and
    before decoding anything when the declared entries exceed ``max_entries`` or a text is
    longer than its entries allow. Keys are checked ascending within each histogram (the
    caller checks them against its binning); weights finite, and > 0 when ``positive``."""
    if not isinstance(data, Mapping):
        raise ValueError(f"must be a packed mapping, got {describe(data)}")
    key_field = "scores" if exact else "key_deltas"
    weight_field = "weights" if "weights" in data else "counts"
    expected = {"packed", "entries", "sizes", key_field, weight_field}
    if set(data) != expected:
        raise ValueError(f"keys must be {sorted(expected)}, got {sorted(map(str, data))[:8]}")
    if data["packed"] != PACKED_FORMAT or type(data["packed"]) is not int:
        raise ValueError(f"packed format {describe(data['packed'])} is not {PACKED_FORMAT}")
    n = data["entries"]
    if type(n) is not int or not 0 <= n <= max_entries:
        raise ValueError(f"entries must be an int in [0, {max_entries}], got {describe(n)}")
    sizes = unpack_uints(from_base64(data["sizes"], 10 * n_hists, "sizes"), n_hists, "sizes")
    if int(sizes.sum(dtype=np.float64)) != n or (sizes > np.uint64(n)).any():
        raise ValueError(f"sizes do not add up to entries={n}")
    if exact:
        keys = unpack_floats(from_base64(data["scores"], 8 * n, "scores"), n, "scores") + 0.0
    else:
        deltas = unzigzag(unpack_uints(from_base64(data["key_deltas"], 10 * n, "key_deltas"), n, "key_deltas"))
        if n and int(np.abs(deltas).max()) > _MAX_KEY_DELTA:
            raise ValueError("key_deltas out of range")
        keys = np.cumsum(deltas)
    starts = np.zeros(n, dtype=bool)
    firsts = np.cumsum(sizes.astype(np.int64)) - sizes.astype(np.int64)
    starts[firsts[sizes > 0]] = True
    if n > 1 and not (np.diff(keys) > 0)[~starts[1:]].all():
        raise ValueError(f"{key_field} must give strictly ascending keys within each histogram")
    if weight_field == "weights":
        weights = unpack_floats(from_base64(data["weights"], 8 * n, "weights"), n, "weights")
        if n and weights.min() < 0:
            raise ValueError("weights must be non-negative")
    else:
        counts = unpack_uints(from_base64(data["counts"], 10 * n, "counts"), n, "counts")
        if n and counts.max() >= np.uint64(1 << 53):
            raise ValueError("counts must be below 2**53")
        weights = counts.astype(np.float64)
    if positive and n and not weights.min() > 0:
        raise ValueError("every stored weight must be positive")
    ids = np.repeat(np.arange(n_hists, dtype=np.int64), sizes.astype(np.int64))
    return ids, keys, weights
