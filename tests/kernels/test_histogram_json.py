"""kernels.histogram_json.small_histograms_to_json == the numpy encoding histograms_to_json used
before it routed small histograms there (``aligned``, ``np.diff``, ``_compact``), JSON text
included (ints stay ints; residues of exact weight sums), for binned and exact BinaryScores on hypothesis streams; and
histograms_to_json gives the same on both sides of SMALL_KEYS."""
from __future__ import annotations

import json
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from streammetrics.kernels.exact_weights import encode_residues
from streammetrics.kernels.histogram import _compact, aligned, histograms_to_json, units_mode
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
    if units_mode(hists):  # exact weight sums: the residues of the inexact floats, by name
        residues = {name: r for name, h in zip(names, hists)
                    if (r := encode_residues([h.weights.get(k, 0) for k in keys.tolist()])) is not None}
        if residues:
            out["residues"] = residues
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


# ----------------------------------------------------------------------------- packed sets


def _numpy_pack(dicts, exact):
    from streammetrics.kernels.binning import ExactBinning, LogGridBinning
    from streammetrics.kernels.histogram import ScoreHistogram, flatten
    from streammetrics.kernels.histogram_json import pack_flat

    binning = ExactBinning() if exact else LogGridBinning(64)
    hists = []
    for d in dicts:
        h = ScoreHistogram(binning)
        h.weights = dict(d)
        hists.append(h)
    return pack_flat(flatten(hists, binning), len(hists), exact)


@given(st.lists(st.dictionaries(st.integers(-(2**19), 2**19), st.sampled_from([1.0, 2.0, 0.5, 7.0, 3e15]),
                                max_size=60), max_size=12),
       st.booleans())
def test_pack_dicts_plain_python_equals_the_array_path(dicts, exact):
    from streammetrics.kernels.histogram_json import pack_dicts, unpack_flat

    if exact:
        dicts = [{k / 7.0 + 0.0: v for k, v in d.items()} for d in dicts]
    ours = pack_dicts(dicts, exact)
    assert ours == _numpy_pack(dicts, exact)  # both sides of SMALL_KEYS: sizes up to 720 entries
    ids, keys, weights = unpack_flat(ours, len(dicts), exact, 10**6)
    back = [dict() for _ in dicts]
    for i, k, w in zip(ids.tolist(), keys.tolist(), weights.tolist()):
        back[i][k] = w
    assert back == dicts


def test_pack_dicts_on_both_sides_of_the_threshold():
    from streammetrics.kernels.histogram_json import pack_dicts

    rng = np.random.default_rng(0)
    for n in (SMALL_KEYS - 1, SMALL_KEYS, SMALL_KEYS + 1, 5 * SMALL_KEYS):
        ids = rng.integers(0, 7, n)
        dicts = [{} for _ in range(7)]
        for i in ids.tolist():
            dicts[i][int(rng.integers(-500, 10**5))] = float(rng.integers(1, 4))
        for exact in (False, True):
            ds = [{k / 3.0: v for k, v in d.items()} for d in dicts] if exact else dicts
            assert pack_dicts(ds, exact) == _numpy_pack(ds, exact)
