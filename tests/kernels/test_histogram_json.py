"""kernels.histogram_json.small_histograms_to_json == the numpy encoding histograms_to_json used
before it routed small histograms there (``aligned``, ``np.diff``, ``_compact``), JSON text
included (ints stay ints), for binned and exact BinaryScores on hypothesis streams; and
histograms_to_json gives the same on both sides of SMALL_KEYS."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streammetrics.kernels.histogram import _compact, aligned, histograms_to_json
from streammetrics.kernels.histogram_json import SMALL_KEYS, small_histograms_to_json
from streammetrics.metrics.binary_scores import BinaryScores

score = st.one_of(st.sampled_from([0.0, 1.0, 0.5, -0.0, 1.0 - 2.0**-53]), st.floats(-5.0, 5.0),
                  st.floats(0.0, 1.0).map(lambda s: round(s, 2)))
weight = st.sampled_from([None, None, 0.0, 0.5, 2.0, 1e-3, 3.0])


def numpy_encoding(hists, names) -> dict[str, Any]:
    """histograms_to_json's array path (the only path before kernels.histogram_json)."""
    keys, weights = aligned(*hists)
    if hists[0].binning.exact:
        out: dict[str, Any] = {"scores": keys.tolist()}
    else:
        out = {"key_deltas": np.diff(keys, prepend=0).tolist()}
    for name, row in zip(names, weights):
        out[name] = _compact(row)
    return out


@given(st.lists(st.tuples(st.integers(0, 1), score, weight), max_size=60), st.booleans())
def test_same_dict_and_json(events, exact):
    sc = BinaryScores(exact=exact)
    for y, s, w in events:
        if w is None:
            sc.update(y, s)
        else:
            sc.update(y, s, w)
    hists = [sc._neg, sc._pos]
    ref = numpy_encoding(hists, ["neg", "pos"])
    ours = small_histograms_to_json([h.weights for h in hists], ["neg", "pos"], sc.exact)  # exact while small
    assert ours == ref
    assert json.dumps(ours) == json.dumps(ref)
    assert json.dumps(histograms_to_json(hists, ["neg", "pos"])) == json.dumps(ref)


def test_both_sides_of_the_threshold():
    for n in (SMALL_KEYS // 2, SMALL_KEYS, 3 * SMALL_KEYS):
        sc = BinaryScores()
        for i in range(n):
            sc.update(i % 2, (i + 0.5) / n)
        hists = [sc._neg, sc._pos]
        names = ["neg", "pos"]
        assert json.dumps(histograms_to_json(hists, names)) == json.dumps(numpy_encoding(hists, names))
