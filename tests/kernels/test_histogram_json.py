"""kernels.histogram_json.small_histograms_to_json == histogram.histograms_to_json, JSON text
included (ints stay ints), for binned and exact BinaryScores on hypothesis streams."""
from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from streammetrics.kernels.histogram import histograms_to_json
from streammetrics.kernels.histogram_json import small_histograms_to_json
from streammetrics.metrics.binary_scores import BinaryScores

score = st.one_of(st.sampled_from([0.0, 1.0, 0.5, -0.0, 1.0 - 2.0**-53]), st.floats(-5.0, 5.0),
                  st.floats(0.0, 1.0).map(lambda s: round(s, 2)))
weight = st.sampled_from([None, None, 0.0, 0.5, 2.0, 1e-3, 3.0])


@given(st.lists(st.tuples(st.integers(0, 1), score, weight), max_size=60), st.booleans())
def test_same_dict_and_json(events, exact):
    sc = BinaryScores(exact=exact)
    for y, s, w in events:
        if w is None:
            sc.update(y, s)
        else:
            sc.update(y, s, w)
    hists = [sc._neg, sc._pos]
    ref = histograms_to_json(hists, ["neg", "pos"])
    ours = small_histograms_to_json([h.weights for h in hists], ["neg", "pos"], exact)
    assert ours == ref
    assert json.dumps(ours) == json.dumps(ref)
