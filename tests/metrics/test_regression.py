"""sm.Regression: parity with scikit-learn, exactness on ill-conditioned data, protocol.

Tolerances. Every metric is compared with scikit-learn as
``|ours - sklearn| <= 1e-12 * max(1, |sklearn|)``: the sums are the same weighted sums but
accumulated in a different order (sequentially per event, pairwise by numpy, combined by
merges), so they agree to a few ulps *relative* to their magnitude, and a value of 1e6 (an
MSE on a 1e3 scale) cannot agree to 1e-12 absolutely. R² = 1 - sse/sst inherits the
relative error of sse/sst, i.e. ``|1 - R²| * O(n u)``, which the same bound covers.
The per-event path uses ``math.log1p`` and the batch path ``numpy.log1p`` (as sklearn
does); they differ by <= 1 ulp (<= 1.2e-13 absolute for any double), and the weighted
RMS of the log differences moves by at most that, so RMSLE stays inside the bound too.

scikit-learn's R² denominator is a two-pass sum around a rounded mean, whose own error is
about ``(u * |mean| / spread)**2`` relative: the sklearn-parity tests therefore draw truths
compare R² with sklearn when that error is below 1e-14 (or the truth is exactly constant,
where the documented force_finite rule applies), and otherwise with the exact R² computed in
rational arithmetic (``fractions.Fraction``), which we match to 1e-12 and sklearn does not.
"""
from __future__ import annotations

import json
import math
import warnings
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn import metrics as skm

import streammetrics as sm
from streammetrics.core.exceptions import UndefinedMetricWarning
from streammetrics.metrics.regression import Regression

REL = 1e-12
METRICS = ("mse", "rmse", "mae", "r2", "rmsle", "mape", "max_error")
SK = {
    "mse": skm.mean_squared_error,
    "rmse": skm.root_mean_squared_error,
    "mae": skm.mean_absolute_error,
    "r2": skm.r2_score,
    "rmsle": skm.root_mean_squared_log_error,
    "mape": skm.mean_absolute_percentage_error,
}


def close(a: float, b: float, rel: float = REL) -> bool:
    if math.isnan(b):
        return math.isnan(a)
    return abs(a - b) <= rel * max(1.0, abs(b))


def sk_value(name, yt, yp, w):
    """scikit-learn's value; max_error (no weights in sklearn) over the positive-weight events."""
    yt, yp = np.asarray(yt, float), np.asarray(yp, float)
    if name == "max_error":
        keep = np.ones(len(yt), bool) if w is None else np.asarray(w) > 0
        return skm.max_error(yt[keep], yp[keep])
    return SK[name](yt, yp, sample_weight=w)


def ours(acc: Regression, name: str) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UndefinedMetricWarning)
        return getattr(acc, name)()


def _floor(x: float) -> float:
    # keep away from underflow (squares of 1e-160 are 0 in sklearn and here alike)
    return 0.0 if abs(x) < 1e-30 else x


offsets = st.sampled_from([0.0, 0.0, 3.0, 1e3, -1e6, 1e9, -1e9])
scales = st.sampled_from([1e-3, 1.0, 1.0, 1e3, 1e6])


@st.composite
def streams(draw, min_size=1, max_size=40):
    """(y_true, y_pred, sample_weight or None): wide ranges, large offsets, zero weights."""
    n = draw(st.integers(min_size, max_size))
    off, scale = draw(offsets), draw(scales)
    unit = st.floats(-1.0, 1.0).map(_floor)
    yt = [off + scale * draw(unit) for _ in range(n)]
    pred_off = draw(st.sampled_from([0.0, off]))
    yp = [pred_off + scale * draw(unit) for _ in range(n)]
    if draw(st.booleans()):  # some exact predictions
        for i in draw(st.lists(st.integers(0, n - 1), max_size=n)):
            yp[i] = yt[i]
    w = draw(st.one_of(
        st.none(),
        st.lists(st.one_of(st.just(0.0), st.just(1.0), st.floats(1e-3, 1e3)), min_size=n, max_size=n),
    ))
    return yt, yp, w


def well_conditioned(yt, w) -> bool:
    """sklearn's two-pass SST is accurate to < 1e-13 relative (see module docstring).

    Its mean is rounded by ~u·max|y|, which adds W·(u·max|y|)² to SST = Σw(y - ȳ)².
    """
    ww = [1.0] * len(yt) if w is None else w
    if sum(ww) == 0 or len({y for y, x in zip(yt, ww) if x > 0}) <= 1:
        return True
    sst, _, _ = _exact(yt, yt, ww)
    u_mag = 2.3e-16 * max(abs(y) for y in yt)
    return sum(ww) * u_mag * u_mag <= 1e-14 * sst


def expected(name, yt, yp, w, force_finite=True):
    """sklearn's value, except R² on a constant (positive-weight) truth: the documented rule."""
    pos = [i for i in range(len(yt)) if w is None or w[i] > 0]
    if name == "r2" and len(yt) >= 2 and pos and len({yt[i] for i in pos}) == 1:
        perfect = all(yt[i] == yp[i] for i in pos)
        if force_finite:
            return 1.0 if perfect else 0.0
        return math.nan if perfect else -math.inf
    return sk_value(name, yt, yp, w)


def check_all(acc: Regression, yt, yp, w):
    conditioned = well_conditioned(yt, w)
    assert acc.count == len(yt)
    assert math.isclose(acc.total_weight, len(yt) if w is None else math.fsum(w), rel_tol=1e-13)
    invalid_log = any(v <= -1 for v in yt + yp)
    if w is not None and sum(w) == 0:  # sklearn raises; a stream gives nan (rmsle: invalid first)
        for name in METRICS:
            if name == "rmsle" and invalid_log:
                with pytest.raises(ValueError, match="less than or equal to -1"):
                    acc.rmsle()
            else:
                assert math.isnan(ours(acc, name))
        return
    for name in METRICS:
        if name == "rmsle" and invalid_log:
            with pytest.raises(ValueError, match="less than or equal to -1"):
                acc.rmsle()
            with pytest.raises(ValueError, match="less than or equal to -1"):
                sk_value(name, yt, yp, w)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if name == "r2" and not conditioned:  # sklearn's own error is too large here
                want = _exact(yt, yp, w or [1.0] * len(yt))[2]
            else:
                want = expected(name, yt, yp, w)
        got = ours(acc, name)
        assert close(got, want), (name, got, want)
        assert type(got) is float


# ----------------------------------------------------------------------- parity
@given(streams())
def test_batch_matches_sklearn(data):
    yt, yp, w = data
    check_all(Regression().update_many(yt, yp, sample_weight=w), yt, yp, w)


@given(streams())
def test_per_event_matches_sklearn(data):
    yt, yp, w = data
    acc = Regression()
    for i in range(len(yt)):
        if w is None:
            acc.update(yt[i], yp[i])
        else:
            acc.update(yt[i], yp[i], w[i])
    check_all(acc, yt, yp, w)


@given(streams(max_size=30), st.randoms(use_true_random=False))
def test_random_splits_and_merge_orders_match_sklearn(data, rnd):
    yt, yp, w = data
    n = len(yt)
    cuts = sorted(rnd.sample(range(1, n), rnd.randint(0, min(5, n - 1)))) if n > 1 else []
    parts = []
    for a, b in zip([0] + cuts, cuts + [n]):
        acc = Regression()
        ww = None if w is None else w[a:b]
        if rnd.random() < 0.5:
            acc.update_many(yt[a:b], yp[a:b], ww)
        else:
            for i in range(a, b):
                acc.update(yt[i], yp[i], 1.0 if w is None else w[i])
        parts.append(acc)
    while len(parts) > 1:  # merge random pairs, in random order, with + or merge()
        i, j = rnd.sample(range(len(parts)), 2)
        a, b = parts[i], parts[j]
        merged = a + b if rnd.random() < 0.5 else a.merge(b)
        parts = [p for k, p in enumerate(parts) if k not in (i, j)] + [merged]
    check_all(parts[0], yt, yp, w)


@given(streams(min_size=2))
def test_per_event_and_batch_states_agree(data):
    """Same state up to the rounding of the combination formulas (1e-12 relative)."""
    yt, yp, w = data
    a = Regression().update_many(yt, yp, w)
    b = Regression()
    for i in range(len(yt)):
        b.update(yt[i], yp[i], 1.0 if w is None else w[i])
    sa, sb = a.to_dict()["state"], b.to_dict()["state"]
    for key in ("count", "log_invalid", "max_error"):
        assert sa[key] == sb[key]
    for key in ("weight", "sse", "sae", "sle", "ape"):
        assert close(sb[key], sa[key]), key
    mean_a, mean_b = sa["mean"][0] + sa["mean"][1], sb["mean"][0] + sb["mean"][1]
    assert abs(mean_a - mean_b) <= 1e-13 * max(abs(v) for v in yt)
    # m2 is compared relative to its own scale and the data's (a constant truth has m2 == 0)
    scale = max(sa["m2"], 1e-300)
    assert abs(sa["m2"] - sb["m2"]) <= 1e-12 * scale or (sa["m2"] == sb["m2"] == 0.0)


def test_r2_and_others_on_sklearn_doc_examples():
    yt, yp = [3, -0.5, 2, 7], [2.5, 0.0, 2, 8]
    acc = Regression().update_many(yt, yp)
    assert acc.mse() == 0.375 and acc.mae() == 0.5 and acc.max_error() == 1.0
    assert close(acc.r2(), skm.r2_score(yt, yp))
    assert close(acc.mape(), skm.mean_absolute_percentage_error(yt, yp))
    yt, yp = [3, 5, 2.5, 7], [2.5, 5, 4, 8]
    acc = Regression().update_many(yt, yp)
    assert close(acc.rmsle(), skm.root_mean_squared_log_error(yt, yp))


# ------------------------------------------------------------- r2 edge cases
@pytest.mark.parametrize("ff", [True, False])
@pytest.mark.parametrize(
    "yt, yp, w",
    [
        ([1.0, 1.0], [1.0, 1.0], None),      # constant, perfect
        ([1.0, 1.0], [1.0, 2.0], None),      # constant, imperfect
        ([1.0, 2.0], [1.0, 3.0], [1.0, 0.0]),  # one positive weight: sst == sse == 0
        ([1.0, 2.0], [5.0, 2.0], [0.0, 1.0]),  # sst == 0, sse == 0
        ([1.0, 2.0, 3.0], [1.0, 2.0, 2.0], [2.0, 0.0, 1.0]),
        ([0.5, 0.5, 0.5], [0.5, 0.25, 0.5], None),
    ],
)
def test_r2_force_finite_matches_sklearn_with_warnings(yt, yp, w, ff):
    with warnings.catch_warnings(record=True) as sk_w:
        warnings.simplefilter("always")
        want = skm.r2_score(yt, yp, sample_weight=w, force_finite=ff)
    for acc in (Regression().update_many(yt, yp, w),
                sum((Regression().update(a, b, 1.0 if w is None else w[i])
                     for i, (a, b) in enumerate(zip(yt, yp))), Regression())):
        with warnings.catch_warnings(record=True) as our_w:
            warnings.simplefilter("always")
            got = acc.r2(force_finite=ff)
        assert close(got, want) or got == want, (got, want)
        assert [x.category for x in our_w] == [x.category for x in sk_w]


def test_r2_constant_truth_is_exact_where_sklearn_has_rounding_noise():
    yt, yp = [0.1, 0.1, 0.1], [0.2, 0.1, 0.1]
    assert skm.r2_score(yt, yp) < -1e30  # sklearn's mean 0.1000...02 leaves sst ~ 6e-34
    for acc in (Regression().update_many(yt, yp), _events(yt, yp)):
        assert acc.r2() == 0.0
        with pytest.warns(RuntimeWarning, match="divide by zero"):
            assert acc.r2(force_finite=False) == -math.inf
        assert _events(yt, yt).r2() == 1.0


def test_r2_single_event_warns_like_sklearn():
    with pytest.warns(UndefinedMetricWarning, match="less than two samples"):
        assert math.isnan(Regression().update(1.0, 2.0).r2())
    with pytest.warns(skm._regression.UndefinedMetricWarning, match="less than two samples"):
        skm.r2_score([1.0], [2.0])
    # two events count, even if one has zero weight (sklearn counts samples, not weight)
    acc = Regression().update(1.0, 2.0).update(5.0, 5.0, weight=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert acc.r2() == skm.r2_score([1.0, 5.0], [2.0, 5.0], sample_weight=[1, 0]) == 0.0


def _events(yt, yp, w=None) -> Regression:
    acc = Regression()
    for i, (a, b) in enumerate(zip(yt, yp)):
        acc.update(a, b, 1.0 if w is None else w[i])
    return acc


# ------------------------------------------------------------- empty / zero weight
def test_empty_and_zero_weight_are_nan_with_warning():
    # sklearn raises on empty input and on all-zero weights; a stream is legitimately empty
    with pytest.raises(ValueError):
        skm.mean_squared_error([], [])
    with pytest.raises(ValueError, match="non-zero"):
        skm.mean_squared_error([1.0, 2.0], [1.0, 1.0], sample_weight=[0, 0])
    for acc, why in ((Regression(), "no events"),
                     (Regression().update_many([1.0, 2.0], [1.0, 1.0], [0, 0]), "zero weight")):
        for name in METRICS:
            with pytest.warns(UndefinedMetricWarning, match=why):
                assert math.isnan(getattr(acc, name)())
    assert Regression().update_many([], []) == Regression()
    acc = Regression().update(1.0, 2.0, weight=0.0)
    assert acc.count == 1 and acc.total_weight == 0.0


def test_max_error_ignores_zero_weight_events():
    acc = Regression().update_many([0.0, 0.0, 0.0], [1.0, 100.0, -2.0], [1.0, 0.0, 0.5])
    assert acc.max_error() == 2.0 == skm.max_error([0.0, 0.0], [1.0, -2.0])
    assert Regression().update(0.0, 100.0, 0.0).update(0.0, 3.0).max_error() == 3.0


# ------------------------------------------------------------- rmsle invalid values
def test_rmsle_invalid_values_raise_but_other_metrics_work():
    acc = Regression().update_many([1.0, 2.0], [1.5, 2.0])
    bad = Regression().update(-1.0, 3.0, weight=0.0)  # sklearn checks values of any weight
    with pytest.raises(ValueError, match="less than or equal to -1"):
        skm.root_mean_squared_log_error([1.0, 2.0, -1.0], [1.5, 2.0, 3.0], sample_weight=[1, 1, 0])
    merged = acc + bad
    with pytest.raises(ValueError, match=r"less than or equal to -1 \(1 such event"):
        merged.rmsle()
    restored = sm.from_dict(json.loads(json.dumps(merged.to_dict())))
    with pytest.raises(ValueError, match="less than or equal to -1"):
        restored.rmsle()
    assert restored.mse() == acc.mse() and restored.count == 3
    batch = Regression().update_many([1.0, 2.0, 0.0, -3.0], [1.5, 2.0, -1.0, 0.0])
    assert batch.to_dict()["state"]["log_invalid"] == 2
    assert close(batch.mse(), skm.mean_squared_error([1.0, 2.0, 0.0, -3.0], [1.5, 2.0, -1.0, 0.0]))
    # values in (-1, 0) are fine
    ok = Regression().update(-0.5, 0.0).update(0.0, -0.999)
    assert close(ok.rmsle(), skm.root_mean_squared_log_error([-0.5, 0.0], [0.0, -0.999]))


# ------------------------------------------------------------- numerical stability
def _exact(yt, yp, w):
    """Exact SST, SSE and R² of the float inputs, in rational arithmetic."""
    Y = [Fraction(v) for v in yt]
    W = [Fraction(v) for v in w]
    tw = sum(W)
    mean = sum(a * b for a, b in zip(Y, W)) / tw
    sst = sum(b * (a - mean) ** 2 for a, b in zip(Y, W))
    sse = sum(b * (a - Fraction(p)) ** 2 for a, p, b in zip(Y, yp, W))
    return float(sst), float(sse), float(1 - sse / sst)


def _naive_sst(yt, w):
    s = s2 = tw = 0.0
    for y, ww in zip(yt, w):
        tw += ww
        s += ww * y
        s2 += ww * y * y
    return s2 - s * s / tw


@pytest.mark.parametrize("offset, noise", [(1e9, 1.0), (1e9, 1e-3), (-1e12, 1.0), (1e6, 1e-6)])
def test_large_offset_is_exact_where_naive_sums_fail(offset, noise):
    rng = np.random.default_rng(7)
    n = 600
    yt = (offset + rng.normal(0, noise, n)).tolist()
    yp = (np.asarray(yt) + rng.normal(0, noise / 3, n)).tolist()
    w = rng.choice([0.5, 1.0, 2.0, 0.0], n).tolist()
    sst, sse, r2 = _exact(yt, yp, w)
    # the textbook one-pass formula loses (almost) everything here
    assert abs(_naive_sst(yt, w) - sst) > 1e-6 * sst
    per_event = _events(yt, yp, w)
    batch = Regression().update_many(yt, yp, w)
    merged = Regression().update_many(yt[:100], yp[:100], w[:100]) + _events(yt[100:], yp[100:], w[100:])
    for acc in (per_event, batch, merged):
        assert abs(acc._m2 - sst) <= 1e-12 * sst
        assert close(acc.r2(), r2)
    # sklearn's two-pass is exact too when the spread is not tiny relative to the offset
    if noise / abs(offset) >= 1e-9:
        assert close(skm.r2_score(yt, yp, sample_weight=w), r2)


def test_plain_welford_would_not_be_enough():
    """The double-double mean is what makes 1e9 + N(0, 1) exact (plain Welford: ~1e-8 error)."""
    rng = np.random.default_rng(3)
    yt = (1e9 + rng.normal(0, 1.0, 1000)).tolist()
    sst, _, _ = _exact(yt, yt, [1.0] * len(yt))
    tw = mean = m2 = 0.0
    for y in yt:
        w0, tw = tw, tw + 1.0
        d = y - mean
        mean += d / tw
        m2 += d * d * (w0 / tw)
    assert abs(m2 - sst) > 1e-10 * sst
    assert abs(_events(yt, yt)._m2 - sst) <= 1e-13 * sst


# ------------------------------------------------------------- merge algebra
@given(streams(min_size=3, max_size=20), st.data())
def test_merge_commutative_bitwise_and_associative(data, draw):
    yt, yp, w = data
    n = len(yt)
    i = draw.draw(st.integers(1, n - 2))
    j = draw.draw(st.integers(i + 1, n - 1))
    ww = w or [1.0] * n
    a, b, c = (Regression().update_many(yt[s], yp[s], ww[s])
               for s in (slice(0, i), slice(i, j), slice(j, n)))
    assert (a + b).to_dict() == (b + a).to_dict()
    left, right = (a + b) + c, a + (b + c)
    sl, sr = left.to_dict()["state"], right.to_dict()["state"]
    assert sl["count"] == sr["count"] and sl["max_error"] == sr["max_error"]
    for key in ("weight", "sse", "sae", "ape", "sle"):
        assert close(sl[key], sr[key])
    assert abs(sl["m2"] - sr["m2"]) <= 1e-12 * max(sr["m2"], 1e-300) or sl["m2"] == sr["m2"]


def test_merge_with_empty_is_identity_and_type_checked():
    a = Regression().update_many([1.0, 2.0, 4.0], [1.5, 2.0, 3.0])
    assert (a + Regression()).to_dict() == a.to_dict() == (Regression() + a).to_dict()
    with pytest.raises(ValueError, match="same type"):
        a.merge(object.__new__(type("Other", (sm.Accumulator,), {})))
    c = a.copy()
    c.update(10.0, 0.0)
    assert a.count == 3 and c.count == 4
    assert c.reset() == Regression()


# ------------------------------------------------------------- validation
def test_invalid_events_raise_and_leave_state_unchanged():
    acc = Regression().update_many([1.0, 2.0], [1.0, 3.0])
    before = acc.to_dict()
    cases = [
        (lambda: acc.update(float("nan"), 1.0), ValueError, "y_true must be finite"),
        (lambda: acc.update(1.0, math.inf), ValueError, "y_pred must be finite"),
        (lambda: acc.update(True, 1.0), TypeError, "y_true must be a real number"),
        (lambda: acc.update("1", 1.0), TypeError, "y_true"),
        (lambda: acc.update(1.0, 1.0, -1.0), ValueError, "weight must be finite and non-negative, got -1.0"),
        (lambda: acc.update(1.0, 1.0, float("nan")), ValueError, "weight"),
        (lambda: acc.update(1.0, 1.0, True), TypeError, "weight"),
        (lambda: acc.update_many([1, 2, 3, 4], [1, 2, 3, 4], [1, 1, 1, -1.0]), ValueError,
         r"sample_weight\[3\] must be non-negative, got -1.0"),
        (lambda: acc.update_many([1, 2, float("inf")], [1, 2, 3]), ValueError, r"y_true\[2\] must be finite"),
        (lambda: acc.update_many([1, 2, 3], [1, 2, float("nan")]), ValueError, r"y_pred\[2\] must be finite"),
        (lambda: acc.update_many([1, 2], [1, 2, 3]), ValueError, "inconsistent batch lengths"),
        (lambda: acc.update_many([1, 2], [1, 2], [1.0]), ValueError, "sample_weight has 1"),
        (lambda: acc.update_many([True, False], [1, 2]), TypeError, "y_true must hold real numbers"),
        (lambda: acc.update_many(["a", "b"], [1, 2]), TypeError, "y_true"),
        (lambda: acc.update_many([1, 2], [1, None]), TypeError, r"y_pred"),
        (lambda: acc.update_many(5.0, [1, 2]), TypeError, "y_true must be a sequence"),
    ]
    for call, exc, match in cases:
        with pytest.raises(exc, match=match):
            call()
        assert acc.to_dict() == before


def test_accepts_lists_arrays_series_ints_and_numpy_scalars():
    yt, yp, w = [1, 2, 3, 5], [1.5, 2, 2, 6], [1, 2, 0, 1]
    ref = Regression().update_many(yt, yp, w)
    for args in ((np.array(yt), np.array(yp, np.float32).astype(float), np.array(w)),
                 (pd.Series(yt), pd.Series(yp), pd.Series(w, dtype=float)),
                 (tuple(yt), iter(yp), w)):
        assert Regression().update_many(*args).to_dict() == ref.to_dict()
    acc = Regression()
    for a, b, ww in zip(np.array(yt), np.array(yp), np.array(w, np.float32)):
        acc.update(a, b, ww)
    state = acc.to_dict()["state"]
    assert all(type(state[k]) is float for k in ("sse", "sae", "m2", "weight"))
    json.dumps(acc.to_dict(), allow_nan=False)
    assert close(acc.r2(), ref.r2())


# ------------------------------------------------------------- serialisation
def test_to_dict_round_trip_and_json_safety_even_after_overflow():
    acc = Regression().update_many([1.0, 2.5, -0.5], [1.0, 2.0, 0.5], [1.0, 2.0, 0.5])
    d = acc.to_dict()
    assert d["type"] == "Regression" and d["version"] == 2
    back = sm.from_dict(json.loads(json.dumps(d, allow_nan=False)))
    assert isinstance(back, Regression) and back.to_dict() == d
    assert Regression.from_dict(d) == acc
    # squares of huge (finite) errors overflow to inf as in sklearn; the dict stays JSON-safe
    huge = Regression().update(1e200, -1e200).update(0.0, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert skm.mean_squared_error([1e200, 0.0], [-1e200, 1.0]) == math.inf == huge.mse()
    text = json.dumps(huge.to_dict(), allow_nan=False)
    assert sm.from_dict(json.loads(text)).mse() == math.inf


def _good_state():
    return Regression().update_many([1.0, 2.0, 4.0], [1.0, 3.0, 1.0]).to_dict()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda d: d["state"].pop("sse"),
        lambda d: d["state"].update(extra=1),
        lambda d: d["state"].update(count=-1),
        lambda d: d["state"].update(count=True),
        lambda d: d["state"].update(count=3.0),
        lambda d: d["state"].update(sse=-1.0),
        lambda d: d["state"].update(sse="1.0"),
        lambda d: d["state"].update(sse="-inf"),
        lambda d: d["state"].update(sse=None),
        lambda d: d["state"].update(sse=[1.0]),
        lambda d: d["state"].update(weight=False),
        lambda d: d["state"].update(mean=[1.0]),
        lambda d: d["state"].update(mean="1.0"),
        lambda d: d["state"].update(mean=[1.0, "__import__('os')"]),
        lambda d: d["state"].update(log_invalid=4),
        lambda d: d["state"].update(count=0),
        lambda d: d["state"].update(weight=0.0),
        lambda d: d.update(version=3),
        lambda d: d.update(config={"x": 1}),
        lambda d: d.update(state=[]),
        lambda d: d.update(type="regresion"),
    ],
)
def test_from_dict_rejects_malformed(mutate):
    d = _good_state()
    mutate(d)
    with pytest.raises(ValueError):
        sm.from_dict(d)


def test_repr_and_copy_independence():
    acc = Regression().update(1.0, 2.0)
    assert "Regression" in repr(acc) and "count=1" in repr(acc)
    assert acc.copy() == acc and acc.copy() is not acc


def test_registered_and_exported():
    assert sm.registered_types()["Regression"] is Regression
    assert sm.Regression is Regression
