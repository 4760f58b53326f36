"""MulticlassMonitor's label-free state against a MulticlassReference: the K per-class score
histograms (every prediction) and the CBPE estimate sums fed per event. Split, merge-order,
per-event = batch, copy / dict / pickle round trips, migration, hostile dicts, and scipy /
NannyML-formula parity (exact while exact, within the guaranteed bounds once binned)."""
from __future__ import annotations

import json
import math
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import ks_2samp, wasserstein_distance

from streammetrics.core.accumulator import from_dict
from streammetrics.events.records import Event
from streammetrics.monitors import MulticlassMonitor
from streammetrics.monitors.multiclass import CLASS_SCORE_MAX_BINS
from streammetrics.monitors.reference_multiclass import MulticlassReference

CLASSES = ["a", "b", "c"]
L = np.array(CLASSES)


def _ref(seed: int = 0, n: int = 400, exact: bool = True, decimals: int | None = 2) -> MulticlassReference:
    rng = np.random.default_rng(seed)
    s = rng.dirichlet([1, 1, 1], n)
    if decimals is not None:
        s = np.round(s, decimals)
    y = [rng.choice(3, p=r / r.sum()) for r in np.clip(s, 1e-9, None)]
    return MulticlassReference.from_arrays(L[y], s, classes=CLASSES, exact=exact)


REF = _ref()


def _events(rows: np.ndarray, weights=None, labelled: bool = False) -> list[Event]:
    out = []
    for i, r in enumerate(rows):
        w = 1.0 if weights is None else float(weights[i])
        out.append(Event(float(i), "m", y_true=CLASSES[i % 3] if labelled else None,
                         scores=tuple(float(v) for v in r), weight=w))
    return out


def _nannyml_formula(ref_rows: tuple[np.ndarray, np.ndarray], s: np.ndarray, w: np.ndarray) -> tuple[float, float]:
    """NannyML's multiclass CBPE with weights (sklearn isotonic one-vs-rest, normalised rows)."""
    from sklearn.isotonic import IsotonicRegression

    y_ref, s_ref = ref_rows
    cal = np.column_stack([
        IsotonicRegression(out_of_bounds="clip").fit(s_ref[:, c], (y_ref == c).astype(float)).predict(s[:, c])
        for c in range(3)])
    den = cal.sum(axis=1)[:, None]
    p = np.divide(cal, den, out=np.full_like(cal, 1 / 3), where=den != 0)
    pred = s.argmax(axis=1)
    acc = float(np.sum(w * p[np.arange(len(s)), pred]) / w.sum())
    f1 = []
    for c in range(3):
        yp = pred == c
        tp = np.sum(w * np.where(yp, p[:, c], 0))
        fp = np.sum(w * np.where(yp, 1 - p[:, c], 0))
        fn = np.sum(w * np.where(~yp, p[:, c], 0))
        d = tp + 0.5 * (fp + fn)
        f1.append(tp / d if d else 0.0)
    return acc, float(np.mean(f1))


rows_st = st.integers(0, 40).flatmap(lambda n: st.tuples(
    st.lists(st.lists(st.sampled_from([0.0, 0.1, 0.25, 0.3, 0.5, 0.7, 0.9, 1.0]), min_size=3, max_size=3),
             min_size=n, max_size=n),
    st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0]), min_size=n, max_size=n)))


def _state(m: MulticlassMonitor) -> dict:
    return json.loads(json.dumps(m.to_dict()))


def _close(a: dict, b: dict) -> None:
    """Two monitor dicts equal up to float summation order."""
    assert a.keys() == b.keys()
    for k in a:
        x, y = a[k], b[k]
        if isinstance(x, dict):
            _close(x, y)
        elif isinstance(x, list):
            assert len(x) == len(y)
            for u, v in zip(x, y):
                _close({"_": u}, {"_": v})
        elif isinstance(x, float) and isinstance(y, float):
            assert x == pytest.approx(y, rel=1e-12, abs=1e-12)
        else:
            assert x == y


@settings(max_examples=60, deadline=None)
@given(rows_st, st.data())
def test_split_and_merge_order_give_the_whole_state(data, draw):
    """Any split of the predictions (per event or in batches, labelled or not), merged in any
    order, has the class histograms and estimate sums of the whole stream (exact ties, zero
    weights, empty parts)."""
    rows, weights = data
    s = np.array(rows, dtype=float).reshape(-1, 3)
    evs = _events(s, weights)
    whole = MulticlassMonitor(CLASSES, reference=REF).update_predictions(evs)
    cuts = sorted(draw.draw(st.lists(st.integers(0, len(evs)), max_size=3)))
    parts = []
    for lo, hi in zip([0, *cuts], [*cuts, len(evs)]):
        m = MulticlassMonitor(CLASSES, reference=REF)
        if draw.draw(st.booleans()):
            m.update_predictions(evs[lo:hi])
        else:
            for e in evs[lo:hi]:
                m.update_prediction(e)
        parts.append(m)
    order = draw.draw(st.permutations(range(len(parts))))
    merged = MulticlassMonitor(CLASSES)
    for i in order:
        merged.merge(parts[i])
    _close(_state(merged), _state(whole))
    for name in ("estimated_accuracy", "estimated_macro_f1"):
        a, b = REF.metrics(merged)[name], REF.metrics(whole)[name]
        assert (a is None and b is None) or a == pytest.approx(b, abs=1e-12)
    for c in CLASSES:
        assert REF.metrics(merged)["per_class"].get(c) == REF.metrics(whole)["per_class"].get(c)


@pytest.mark.parametrize("weighted", [False, True])
def test_per_event_estimate_equals_nannyml_formula_and_batch(weighted):
    rng = np.random.default_rng(1)
    y_ref = rng.integers(0, 3, 500)
    s_ref = np.round(rng.dirichlet([1, 1, 1], 500), 2)
    s_ref[np.arange(500), y_ref] += 0.3  # informative scores
    s_ref /= s_ref.sum(axis=1, keepdims=True)
    ref = MulticlassReference.from_arrays(L[y_ref], s_ref, classes=CLASSES, exact=True)
    s = rng.dirichlet([2, 1, 1], 300)
    w = rng.choice([0.0, 0.5, 1.0, 3.0], len(s)) if weighted else np.ones(len(s))
    evs = _events(s, w)
    per_event = MulticlassMonitor(CLASSES, reference=ref)
    for e in evs:
        per_event.update_prediction(e)
    batch = MulticlassMonitor(CLASSES, reference=ref).update_predictions(evs)
    acc, f1 = _nannyml_formula((y_ref, s_ref), s, w)
    for m in (per_event, batch):
        got = ref.metrics(m)
        assert got["estimated_accuracy"] == pytest.approx(acc, abs=1e-12)
        assert got["estimated_macro_f1"] == pytest.approx(f1, abs=1e-12)
    assert ref.metrics(per_event)["estimated_accuracy"] == pytest.approx(ref.estimate(s, w)["estimated_accuracy"])


def test_calibrated_row_is_np_interp():
    ref = _ref(3, 300, exact=False, decimals=None)  # binned fit: knots at bin edges
    rng = np.random.default_rng(2)
    s = np.vstack([rng.dirichlet([1, 1, 1], 200), [[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]]])
    for row, want in zip(s, ref.calibrated(s)):
        assert ref.calibrated_row(row.tolist()) == pytest.approx(want.tolist(), abs=1e-15)


def test_estimates_without_labels_and_unchanged_by_them():
    s = np.random.default_rng(4).dirichlet([1, 2, 1], 100)
    free = MulticlassMonitor(CLASSES, reference=REF).update_predictions(_events(s))
    m0 = REF.metrics(free)
    assert m0["estimated_accuracy"] is not None and free.labeled == 0
    assert m0["estimated_accuracy"] == pytest.approx(REF.estimate(s)["estimated_accuracy"], abs=1e-12)
    free.update_outcomes(_events(s, labelled=True))
    assert REF.metrics(free)["estimated_accuracy"] == m0["estimated_accuracy"]
    assert free.snapshot()["accuracy"] is not None


def test_round_trips_keep_the_state_and_the_binding_rules():
    s = np.random.default_rng(5).dirichlet([1, 1, 1], 50)
    m = MulticlassMonitor(CLASSES, reference=REF).update_predictions(_events(s, labelled=True))
    for other in (m.copy(), from_dict(_state(m)), pickle.loads(pickle.dumps(m))):
        assert other == m and REF.metrics(other) == REF.metrics(m)
    assert m.copy().reference is REF  # copies keep the binding; loaded states are unbound
    assert from_dict(_state(m)).reference is None
    unbound = MulticlassMonitor(CLASSES).update_predictions(_events(s))
    assert REF.metrics(unbound)["estimated_accuracy"] is None  # never fed: null, not a guess
    partial = MulticlassMonitor(CLASSES, reference=REF).update_predictions(_events(s[:10]))
    partial.merge(unbound)  # 10 of 60 predictions fed: null
    assert REF.metrics(partial)["estimated_accuracy"] is None
    other_ref = _ref(9)
    mixed = MulticlassMonitor(CLASSES, reference=other_ref).update_predictions(_events(s))
    mixed.merge(m)  # sums of two references: never read
    assert mixed._estimate[0] == "" and other_ref.metrics(mixed)["estimated_accuracy"] is None
    with pytest.raises(ValueError, match="classes"):
        MulticlassMonitor(["x", "y", "z"], reference=REF)
    # a reference read again (a restart) has the same fingerprint, so restored sums are read
    again = MulticlassReference.from_dict(json.loads(json.dumps(REF.to_dict())))
    assert again.fingerprint == REF.fingerprint and again.metrics(m) == REF.metrics(m)


def test_use_references_binds_by_key_at_the_first_prediction():
    s = np.random.default_rng(6).dirichlet([1, 1, 1], 20)
    m = MulticlassMonitor(CLASSES).use_references({("m", ""): REF})
    m.update_prediction(_events(s[:1])[0])
    assert m.reference is REF
    n = MulticlassMonitor(CLASSES).use_references({("other", ""): REF}).update_predictions(_events(s))
    assert n.reference is None and n._estimate is None


def test_version_2_dicts_migrate_with_unknown_label_free_histograms():
    s = np.random.default_rng(7).dirichlet([1, 1, 1], 30)
    m = MulticlassMonitor(CLASSES).update_events(_events(s, labelled=True))
    d = _state(m)
    d["version"] = 2
    del d["state"]["class_scores"], d["state"]["estimate"]
    old = from_dict(d)
    assert old._class_scores is None and old._estimate is None
    # every prediction labelled: per-class drift reads the labelled histograms
    assert REF.metrics(old)["per_class"]["a"]["drift_ks"] is not None
    assert old.merge(m)._class_scores is None  # unknown stays unknown


@pytest.mark.parametrize("mutate, match", [
    (lambda st: st.update(estimate={"reference": "x", "count": 10**9, "tp": [0, 0, 0], "prob": [0, 0, 0]}), "count"),
    (lambda st: st.update(estimate={"reference": "x", "count": 1, "tp": [0, -1, 0], "prob": [0, 0, 0]}), "tp"),
    (lambda st: st.update(estimate=[1, 2]), "estimate"),
    (lambda st: st.update(class_scores=st["class_scores"][:2]), "class_scores"),
    (lambda st: st["class_scores"][0]["state"].update(count=999), "class_scores"),
])
def test_hostile_dicts_are_refused_naming_the_field(mutate, match):
    s = np.random.default_rng(8).dirichlet([1, 1, 1], 5)
    d = _state(MulticlassMonitor(CLASSES, reference=REF).update_predictions(_events(s)))
    mutate(d["state"])
    with pytest.raises(ValueError, match=match):
        from_dict(d)


def test_binned_class_histograms_bound_scipy_and_stay_bounded():
    """Past CLASS_SCORE_MAX_BINS distinct scores per column the histograms move to a log
    grid: at most that many keys each, and the drift bounds hold scipy's values."""
    ref = _ref(10, 600, exact=True, decimals=None)
    rng = np.random.default_rng(11)
    s = rng.dirichlet([2, 1, 1], 3 * CLASS_SCORE_MAX_BINS)
    m = MulticlassMonitor(CLASSES)
    m.update_predictions(_events(s[:1000]))
    for e in _events(s[1000:]):
        m.update_prediction(e)
    assert all(d.bins_per_octave is not None and len(d.histogram()[0]) <= CLASS_SCORE_MAX_BINS
               for d in m._class_scores)
    s_ref = np.random.default_rng(10).dirichlet([1, 1, 1], 600)  # the reference's rows (see _ref)
    got = ref.metrics(m)
    for c, name in enumerate(CLASSES):
        row = got["per_class"][name]
        ks = ks_2samp(s[:, c], s_ref[:, c]).statistic
        wd = wasserstein_distance(s[:, c], s_ref[:, c])
        assert row["drift_ks_low"] <= ks <= row["drift_ks_high"]
        assert row["drift_wasserstein_low"] <= wd <= row["drift_wasserstein_high"]
        assert not math.isclose(row["drift_ks_low"], row["drift_ks_high"])  # binned: a real interval


@settings(max_examples=30, deadline=None)
@given(rows_st)
def test_exact_per_class_drift_equals_scipy(data):
    rows, weights = data
    s = np.array(rows, dtype=float).reshape(-1, 3)
    w = np.array(weights)
    m = MulticlassMonitor(CLASSES).update_predictions(_events(s, w))
    got = REF.metrics(m)
    if not len(s) or w.sum() == 0:
        assert got["per_class"] == {} and got["drift_ks"] is None
        return
    rng = np.random.default_rng(0)
    s_ref = np.round(rng.dirichlet([1, 1, 1], 400), 2)
    for c, name in enumerate(CLASSES):
        row = got["per_class"][name]
        assert row["drift_ks"] == pytest.approx(ks_2samp(
            np.repeat(s[:, c], (w * 2).astype(int)), s_ref[:, c]).statistic, abs=1e-12)
        assert row["drift_wasserstein"] == pytest.approx(
            wasserstein_distance(s[:, c], s_ref[:, c], u_weights=w), abs=1e-12)
        # exact: the bounds are the value (widened only by the float-rounding bound of the sums)
        assert row["drift_ks_low"] <= row["drift_ks"] <= row["drift_ks_high"]
        assert row["drift_ks_high"] - row["drift_ks_low"] <= 1e-9


@pytest.mark.parametrize("batch", [False, True])
def test_a_weight_past_the_total_bound_changes_nothing(batch):
    s = np.random.default_rng(12).dirichlet([1, 1, 1], 4)
    m = MulticlassMonitor(CLASSES, reference=REF).update_predictions(_events(s))
    before = _state(m)
    bad = _events(s[:2], [1e300, 1e300])
    with pytest.raises(ValueError, match="total weight"):
        if batch:
            m.update_predictions(bad)
        else:
            for e in bad:
                m.update_prediction(e)
    if batch:
        assert _state(m) == before
    else:  # the first (valid) event was applied, the refused one changed nothing
        assert m.count == 5 and m._estimate[1] == 5 and all(d.count == 5 for d in m._class_scores)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 1500), st.floats(0.2, 5.0))
def test_per_class_drift_bounds_hold_scipy_on_a_binned_reference(seed, n, alpha):
    """A binned reference (64 bins per octave) and a window exact or binned: the guaranteed
    bounds hold scipy's KS and Wasserstein of the raw rows."""
    ref_rows = np.random.default_rng(seed).dirichlet([1, 1, 1], 400)
    ref = MulticlassReference.from_arrays(L[ref_rows.argmax(axis=1)], ref_rows, classes=CLASSES)
    s = np.random.default_rng(seed + 1).dirichlet([alpha, 1, 1], n)
    got = ref.metrics(MulticlassMonitor(CLASSES).update_predictions(_events(s)))
    for c, name in enumerate(CLASSES):
        row = got["per_class"][name]
        ks = ks_2samp(s[:, c], ref_rows[:, c]).statistic
        wd = wasserstein_distance(s[:, c], ref_rows[:, c])
        assert row["drift_ks_low"] <= ks <= row["drift_ks_high"]
        assert row["drift_wasserstein_low"] <= wd <= row["drift_wasserstein_high"]
