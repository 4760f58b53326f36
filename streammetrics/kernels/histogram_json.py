"""``histograms_to_json`` for small histograms in plain Python (issue 12, state encoding).

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

__all__ = ["SMALL_KEYS", "small_histograms_to_json"]

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
