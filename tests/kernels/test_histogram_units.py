"""Histograms in units mode (exact weight sums, kernels.exact_weights): batches summed
exactly, regridding and the budget keep the exact totals, and the JSON forms (plain and
packed) round-trip the units through the written floats plus their residues."""
import json

import numpy as np
import pytest

from streammetrics.kernels.binning import ExactBinning, LogGridBinning
from streammetrics.kernels.exact_weights import UNIT, units_of
from streammetrics.kernels.histogram import (
    ScoreHistogram,
    add_grouped,
    aligned,
    bound,
    collapse,
    flatten,
    histograms_from_json,
    histograms_to_json,
    units_mode,
)
from streammetrics.kernels.histogram_json import pack_dicts, pack_flat, unpack_flat


def _batch(binning, seed, n=500):
    rng = np.random.default_rng(seed)
    scores = rng.choice([0.1, 0.2, 0.5, 0.9, 0.95, 0.33], n) if binning.exact else rng.random(n)
    return binning.keys(scores), rng.integers(0, 2, n), rng.random(n) * 3


@pytest.mark.parametrize("binning", [LogGridBinning(64), ExactBinning()], ids=["grid", "exact"])
@pytest.mark.parametrize("seed", range(3))
def test_units_mode_sums_exactly_and_round_trips(binning, seed):
    keys, groups, w = _batch(binning, seed)
    hists = [ScoreHistogram(binning) for _ in range(2)]
    add_grouped(hists, keys, groups, w, exact=True)
    want: list[dict] = [{}, {}]
    for k, g, x in zip(keys.tolist(), groups.tolist(), w.tolist()):
        want[g][k] = want[g].get(k, 0) + units_of(x)
    assert [h.weights for h in hists] == want and units_mode(hists)
    assert aligned(*hists)[1].dtype == np.float64
    unit = [ScoreHistogram(binning) for _ in range(2)]
    add_grouped(unit, keys, groups, None, exact=True)
    assert sum(v for h in unit for v in h.weights.values()) == len(keys) * UNIT

    data = json.loads(json.dumps(histograms_to_json(hists, ["neg", "pos"])))
    assert "residues" in data
    back = histograms_from_json(data, binning, ["neg", "pos"], exact_weights=True)
    assert [h.weights for h in back] == want
    with pytest.raises(ValueError, match="residues"):
        histograms_from_json(data, binning, ["neg", "pos"])  # a float-only caller refuses them

    flat = flatten(hists, binning)
    assert flat[2].dtype == object
    packed = json.loads(json.dumps(pack_flat(flat, 2, binning.exact)))
    assert pack_dicts([h.weights for h in hists], binning.exact) == packed
    assert unpack_flat(packed, 2, binning.exact, 10**6, exact_weights=True)[2].tolist() == flat[2].tolist()
    with pytest.raises(ValueError, match="residues"):
        unpack_flat(packed, 2, binning.exact, 10**6)

    total = sum(sum(d.values()) for d in want)
    small = [h.copy() for h in hists]
    if binning.exact:
        bound(binning, small, 64, 3)
    else:
        collapse(small, 20)
    assert sum(sum(h.weights.values()) for h in small) == total and units_mode(small)


def test_whole_weights_write_no_residues_and_decode_as_floats():
    binning = LogGridBinning(64)
    keys, groups, _ = _batch(binning, 0, 50)
    hists = [ScoreHistogram(binning) for _ in range(2)]
    add_grouped(hists, keys, groups, None)
    data = histograms_to_json(hists, ["neg", "pos"])
    assert "residues" not in data
    back = histograms_from_json(data, binning, ["neg", "pos"], exact_weights=True)
    assert not units_mode(back) and [h.weights for h in back] == [h.weights for h in hists]


@pytest.mark.parametrize("residues", [{"neg": [[0, [[3, -80]]]]}, {"neg": []}, {"other": [[0, [[1, -60]]]]}, [1],
                                      {"neg": [[99, [[4503599627370496, -110]]]]}])
def test_malformed_histogram_residues_are_refused(residues):
    binning = ExactBinning()
    data = {"scores": [0.5], "neg": [0.1], "pos": [0], "residues": residues}
    with pytest.raises(ValueError, match="residue"):
        histograms_from_json(data, binning, ["neg", "pos"], exact_weights=True)
