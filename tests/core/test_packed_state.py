"""The packed arrays inside state dicts (core.state, kernels.histogram_json; issue 12 point 2):
round trips, canonical and bounded decoding, and hostile packed dicts refused with a one-line
ValueError before anything large is allocated; version-1 (list) dicts still load."""
from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import streammetrics as sm
from streammetrics.core.state import (
    from_base64,
    pack_floats,
    pack_uints,
    to_base64,
    unpack_floats,
    unpack_uints,
    unzigzag,
    zigzag,
)
from streammetrics.kernels.histogram import histograms_to_json
from streammetrics.kernels.histogram_json import pack_flat, unpack_flat

PEAK = 8 << 20  # bytes: rejections stay far below what the claimed sizes would take


@given(st.lists(st.integers(0, 2**64 - 1), max_size=50))
def test_varints_round_trip(values):
    data = pack_uints(np.array(values, dtype=np.uint64))
    assert unpack_uints(data, len(values)).tolist() == values
    assert len(data) == sum(max(1, -(-v.bit_length() // 7)) for v in values)


@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=50))
def test_zigzag_round_trips_and_keeps_small_magnitudes_small(values):
    codes = zigzag(np.array(values, dtype=np.int64))
    assert unzigzag(codes).tolist() == values
    assert all(int(c) == (2 * v if v >= 0 else -2 * v - 1) for c, v in zip(codes, values))


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=20))
def test_floats_round_trip_through_base64(values):
    text = to_base64(pack_floats(values))
    back = unpack_floats(from_base64(text, 8 * len(values)), len(values))
    assert back.tolist() == values


@pytest.mark.parametrize("data,count,words", [
    (b"\x80", 1, "truncated"),
    (b"\x81\x00", 1, "longer than needed"),
    (b"\xff" * 9 + b"\x02", 1, "64 bits"),
    (b"\xff" * 11, 1, "cannot hold"),
    (b"\x01\x02", 1, "expected 1"),
    (b"\x01", 2, "cannot hold"),
])
def test_bad_varints(data, count, words):
    with pytest.raises(ValueError, match=words):
        unpack_uints(data, count)


def test_base64_is_checked_before_decoding():
    with pytest.raises(ValueError, match="base64 string"):
        from_base64([1, 2], 10)
    with pytest.raises(ValueError, match="not valid base64"):
        from_base64("ab!d", 10)
    with pytest.raises(ValueError, match="not valid base64"):
        from_base64("é", 10)
    text = "A" * (40 << 20)  # 40 MB of base64 where 16 bytes are expected
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="exceed"):
            from_base64(text, 16)
        assert tracemalloc.get_traced_memory()[1] < 1 << 20
    finally:
        tracemalloc.stop()
    with pytest.raises(ValueError, match="not finite"):
        unpack_floats(pack_floats([1.0, float("nan")]), 2)


def _flat():
    return np.array([0, 0, 2], dtype=np.int64), np.array([5, 9, 7], dtype=np.int64), np.array([1.0, 2.0, 1.0])


def test_pack_flat_round_trips_counts_and_float_weights():
    for weights in ([1.0, 2.0, 1.0], [0.5, 2.0, 1e-3]):
        flat = (*_flat()[:2], np.array(weights))
        data = json.loads(json.dumps(pack_flat(flat, 3, exact=False)))
        assert ("counts" in data) == (weights == [1.0, 2.0, 1.0])
        for a, b in zip(unpack_flat(data, 3, False, 10), flat):
            assert a.tolist() == b.tolist()
    exact = (np.array([1, 1]), np.array([-0.5, 0.25]), np.array([3.0, 1.0]))
    back = unpack_flat(pack_flat(exact, 2, exact=True), 2, True, 10)
    assert back[1].tolist() == [-0.5, 0.25] and back[0].tolist() == [1, 1]


@pytest.mark.parametrize("edit,words", [
    (lambda d: d.__setitem__("entries", 11), "entries"),
    (lambda d: d.__setitem__("entries", 2), "sizes"),
    (lambda d: d.__setitem__("packed", 2), "packed format"),
    (lambda d: d.__setitem__("extra", 1), "keys"),
    (lambda d: d.__setitem__("key_deltas", to_base64(pack_uints(zigzag([5, -1, 7])))), "ascending"),
    (lambda d: d.__setitem__("key_deltas", to_base64(pack_uints(zigzag([5, 1 << 41, -7])))), "range"),
    (lambda d: d.__setitem__("counts", to_base64(pack_uints([1, 0, 1]))), "positive"),
    (lambda d: d.__setitem__("counts", to_base64(pack_uints([1, 1 << 53, 1]))), "2\\*\\*53"),
    (lambda d: d.__setitem__("counts", to_base64(pack_uints([1, 300]))), "expected 3 varints"),
    (lambda d: d.__setitem__("sizes", to_base64(pack_uints([2, 0]))), "varints"),
    (lambda d: d.__setitem__("counts", 7), "base64"),
])
def test_hostile_packed_sets(edit, words):
    d = pack_flat(_flat(), 3, exact=False)
    edit(d)
    with pytest.raises(ValueError, match=words):
        unpack_flat(d, 3, False, 10)


def _rejected(d, *words):
    tracemalloc.start()
    try:
        with pytest.raises(ValueError) as info:
            sm.from_dict(d)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    text = str(info.value)
    assert "\n" not in text and len(text) < 600
    for w in words:
        assert w in text, (w, text)
    assert peak < PEAK, peak
    return text


def _multiclass():
    rng = np.random.default_rng(0)
    acc = sm.MulticlassScores(list(range(5)), max_exact=20)
    acc.update_many(rng.integers(0, 5, 200), rng.dirichlet(np.ones(5), 200))
    assert not acc.exact
    return acc.to_dict()


def test_hostile_sizes_are_refused_before_decoding():
    d = _multiclass()
    h = d["state"]["histograms"]
    h["entries"] = 10**8  # claimed: would be GBs of dicts
    h["key_deltas"] = "AAAA" * (10 << 20)  # 40 MB of text, decoded nowhere
    _rejected(d, "histograms", "entries")
    d = _multiclass()
    d["state"]["histograms"]["counts"] = "AQ" * (8 << 20)
    _rejected(d, "histograms", "counts")


@pytest.mark.parametrize("edit,words", [
    (lambda s: s["histograms"].__setitem__("key_deltas", to_base64(pack_uints(zigzag([1 << 39] * s["histograms"]
                                                                                   ["entries"])))), "keys"),
    (lambda s: s["histograms"].__setitem__("counts", to_base64(pack_uints([2] * s["histograms"]["entries"]))),
     "sum"),
    (lambda s: s.__setitem__("events", [1, 1, 1, 1, 1]), "entries"),
    (lambda s: s.__setitem__("bins_per_octave", None), "histograms"),
    (lambda s: s.__setitem__("bins_per_octave", 0.1), "bins_per_octave"),
    (lambda s: s.__setitem__("bins_per_octave", True), "bins_per_octave"),
    (lambda s: s["cells"].__setitem__("key_deltas", to_base64(pack_uints(zigzag([30] + [1] * (s["cells"]["entries"]
                                                                                            - 1))))), "cells"),
])
def test_hostile_multiclass_packed_states(edit, words):
    d = _multiclass()
    edit(d["state"])
    _rejected(d, "MulticlassScores", words)


def _v1(acc: sm.MulticlassScores) -> dict:
    """The version-1 layout of a MulticlassScores on its finest grid (or exact=True)."""
    d = acc.to_dict()
    k = len(acc.classes)
    names = [f"t{t}" for t in range(k)]
    d["version"] = 1
    del d["config"]["max_bins"], d["config"]["max_exact"]
    state = d["state"]
    state.pop("bins_per_octave")
    state["histograms"] = [histograms_to_json([acc._h[t][c] for t in range(k)], names) for c in range(k)]
    state["cells"] = [[t, p, w] for (t, p), w in sorted(acc._cells.items())]
    return json.loads(json.dumps(d))


def test_version_1_dicts_load_and_coarsen_to_the_budget():
    rng = np.random.default_rng(5)
    k, n = 20, 6000
    y = rng.integers(0, k, n)
    s = rng.dirichlet(np.ones(k) * 0.3, n)
    old = sm.MulticlassScores(list(range(k)), max_exact=1, max_bins=10**7).update_many(y, s)  # main's state: 64 bpo
    assert old.bins_per_octave == 64 and sum(len(h) for h in old._hist_list()) > 65536
    v1 = _v1(old)
    new = sm.from_dict(v1)
    assert new.version == 2 and new.bins_per_octave < 64  # coarsened to the default max_bins
    assert sum(len(h) for h in new._hist_list()) <= new.max_bins
    assert new.count == n and new._cells == old._cells and new.top_k_accuracy(1) == old.top_k_accuracy(1)
    exact = sm.MulticlassScores(list(range(k)), exact=True).update_many(y, s)
    low, high = new.roc_auc_bounds()
    assert low <= exact.roc_auc() <= high
    small = sm.MulticlassScores([0, 1, 2], max_exact=1).update_many([0, 1, 2], np.eye(3) * 0.8 + 0.1)
    migrated = sm.from_dict(_v1(small))  # version 1 had no budget: the default one now
    assert migrated.bins_per_octave == 64 and migrated.max_exact == 8192
    assert [h.weights for h in migrated._hist_list()] == [h.weights for h in small._hist_list()]
    ex = sm.MulticlassScores([0, 1], exact=True).update_many([0, 1], [[0.3, 0.7], [0.2, 0.8]])
    assert sm.from_dict(_v1(ex)) == ex
    bad = _v1(small)
    bad["state"]["cells"] = [[0, 9, 1.0]]
    _rejected(bad, "cells")
