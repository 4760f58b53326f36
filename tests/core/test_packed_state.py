"""The packed arrays inside state dicts (core.state, kernels.histogram_json; issue 12 point 2):
round trips, canonical and bounded decoding, and hostile packed dicts refused with a one-line
ValueError before anything large is allocated; version-1 (list) dicts still load."""
from __future__ import annotations

import json
import tracemalloc
import zlib

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


def _raw(sizes=(2, 0, 1), deltas=(5, 4, -2), counts=(1, 2, 1), entries=3):
    """A hand-made uncompressed packed set (deltas zig-zagged, counts as varints)."""
    parts = [pack_uints(list(sizes)), pack_uints(zigzag(list(deltas))), pack_uints(list(counts))]
    return {"packed": 1, "entries": entries, "keys": "key_deltas", "weights": "counts",
            "lengths": [len(x) for x in parts], "zlib": False, "data": to_base64(b"".join(parts))}


def test_pack_flat_round_trips_counts_float_weights_and_compression():
    assert pack_flat(_flat(), 3, exact=False) == _raw()
    for weights in ([1.0, 2.0, 1.0], [0.5, 2.0, 1e-3]):
        flat = (*_flat()[:2], np.array(weights))
        data = json.loads(json.dumps(pack_flat(flat, 3, exact=False)))
        assert (data["weights"] == "counts") == (weights == [1.0, 2.0, 1.0])
        for a, b in zip(unpack_flat(data, 3, False, 10), flat):
            assert a.tolist() == b.tolist()
    exact = (np.array([1, 1]), np.array([-0.5, 0.25]), np.array([3.0, 1.0]))
    back = unpack_flat(pack_flat(exact, 2, exact=True), 2, True, 10)
    assert back[1].tolist() == [-0.5, 0.25] and back[0].tolist() == [1, 1]
    n = 5000  # long and repetitive: compressed
    big = (np.arange(n) // 5, np.tile(np.arange(5), n // 5), np.ones(n))
    packed = pack_flat(big, n // 5, exact=False)
    assert packed["zlib"] and len(packed["data"]) < sum(packed["lengths"]) / 4
    for a, b in zip(unpack_flat(packed, n // 5, False, n), big):
        assert a.tolist() == b.tolist()


def _zlib(d, payload: bytes):
    return {**d, "zlib": True, "data": to_base64(zlib.compress(payload))}


@pytest.mark.parametrize("d,words", [
    ({**_raw(), "entries": 11}, "entries"),
    (_raw(entries=2, sizes=(1, 0, 1), deltas=(5, 4), counts=(1, 1)) | {"entries": 3}, "sizes"),
    (_raw(sizes=(2, 0, 0)), "sizes"),
    ({**_raw(), "packed": 2}, "packed format"),
    ({**_raw(), "extra": 1}, "keys"),
    ({**_raw(), "keys": "scores"}, "keys must be"),
    ({**_raw(), "zlib": 1}, "zlib"),
    ({**_raw(), "lengths": [1, 3]}, "lengths"),
    ({**_raw(), "lengths": [1, 3, 4]}, "holds"),
    (_raw(deltas=(5, -1, 7)), "ascending"),
    (_raw(deltas=(5, 1 << 41, -7)), "range"),
    (_raw(counts=(1, 0, 1)), "positive"),
    (_raw(counts=(1, 1 << 53, 1)), "2\\*\\*53"),
    (_raw(counts=(1, 300)), "expected 3 varints"),
    ({**_raw(), "data": 7}, "base64"),
    ({**_raw(), "zlib": True}, "zlib stream"),
    (_zlib(_raw(), b"\x02\x00\x01\x0a\x08\x03\x01\x02\x01" * 1000), "inflate"),
    (_zlib(_raw(), b"\x02\x00\x01"), "inflate"),
])
def test_hostile_packed_sets(d, words):
    with pytest.raises(ValueError, match=words):
        unpack_flat(d, 3, False, 10)


def test_a_zlib_bomb_inflates_no_further_than_the_declared_lengths():
    d = _zlib(_raw(entries=10**6, sizes=(10**6, 0, 0), deltas=[1] * 10**6, counts=[1] * 10**6), b"\x00" * (1 << 28))
    assert len(d["data"]) < 1 << 20  # 256 MB of zeros in well under 1 MB
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="inflate"):
            unpack_flat(d, 3, False, 10**6)
        assert tracemalloc.get_traced_memory()[1] < 40 << 20  # the declared ~20 MB, not 256 MB
    finally:
        tracemalloc.stop()


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
    h["data"] = "AAAA" * (10 << 20)  # 40 MB of text, decoded nowhere
    _rejected(d, "histograms", "entries")
    d = _multiclass()
    d["state"]["histograms"]["data"] = "AQ" * (8 << 20)
    _rejected(d, "histograms", "data")


def _repack(packed, n_hists, exact=False, **arrays):
    """``packed`` with some of its decoded arrays (ids, keys, weights) replaced."""
    ids, keys, weights = unpack_flat(packed, n_hists, exact, 10**7, positive=False)
    flat = {"ids": ids, "keys": keys, "weights": weights, **arrays}
    return pack_flat((flat["ids"], flat["keys"], flat["weights"]), n_hists, exact)


@pytest.mark.parametrize("edit,words", [
    (lambda s: s.__setitem__("histograms", _repack(s["histograms"], 25, keys=np.arange(s["histograms"]["entries"])
                                                   + (1 << 39))), "keys"),
    (lambda s: s.__setitem__("histograms", _repack(s["histograms"], 25, weights=np.full(s["histograms"]["entries"],
                                                                                        2.0))), "sum"),
    (lambda s: s.__setitem__("events", [1, 1, 1, 1, 1]), "entries"),
    (lambda s: s.__setitem__("bins_per_octave", None), "histograms"),
    (lambda s: s.__setitem__("bins_per_octave", 0.1), "bins_per_octave"),
    (lambda s: s.__setitem__("bins_per_octave", True), "bins_per_octave"),
    (lambda s: s.__setitem__("cells", _repack(s["cells"], 1, keys=np.arange(s["cells"]["entries"]) + 20)), "cells"),
    (lambda s: s.__setitem__("ovr_histograms", None), "ovr_histograms"),
    (lambda s: s.__setitem__("ovr_histograms", _repack(s["ovr_histograms"], 10, weights=np.full(
        s["ovr_histograms"]["entries"], 3.0))), "one-vs-rest"),
    (lambda s: s.__setitem__("ovr_bins_per_octave", 128), "ovr_bins_per_octave"),
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
    old = sm.MulticlassScores(list(range(k)), max_exact=1, max_bins=10**7).update_many(y, s)  # main's: 64 bpo
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


def test_one_vs_rest_set_is_null_while_the_pairs_are_exact():
    acc = sm.MulticlassScores([0, 1, 2]).update_many([0, 1], [[0.5, 0.3, 0.2], [0.1, 0.8, 0.1]])
    d = acc.to_dict()
    assert d["state"]["ovr_bins_per_octave"] is None and d["state"]["ovr_histograms"] is None
    d["state"]["ovr_histograms"] = _multiclass()["state"]["ovr_histograms"]
    _rejected(d, "ovr_histograms", "null")
