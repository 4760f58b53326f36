"""BinaryMonitor's per-event paths (``update_event`` / ``update`` of a unit-weight event with a
score inside (0, 1) join the small form, applied to the parts event by event or through their
``update_many``) build exactly the state the three accumulators build through
their own ``update`` methods (issue 12 point 4): through the exact
phase, the move to the grid and every coarsening, with the label-free and label-based
histograms on different grids (delayed labels), and mixed with events the small form leaves
to the accumulators (weights, 0.0 / 1.0, margins, bools). Small ``update_events`` batches go
event by event; their snapshots agree with the vectorised path's."""
from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from streammetrics.events.parser import EventParser
from streammetrics.metrics.binary_scores import BinaryScores
from streammetrics.metrics.confusion import ConfusionMatrix
from streammetrics.metrics.score_distribution import ScoreDistribution
from streammetrics.monitors import BinaryMonitor
from streammetrics.monitors.binary import SMALL_BATCH

PARSER = EventParser("binary", require_key=False)


def separate(events: list[dict], threshold: float, max_bins: int) -> tuple:
    """The three accumulators updated one by one, as BinaryMonitor.update did before fusing."""
    pr = ScoreDistribution(threshold=threshold, max_bins=max_bins)
    sc = BinaryScores(max_bins=max_bins)
    cm = ConfusionMatrix(labels=[0, 1])
    for e in events:
        y, s, w = (1 if e["y_true"] else 0), e["score"], e.get("weight")
        if w is None:
            pr.update(s)
            sc.update(y, s)
            cm.update(y, 1 if s >= threshold else 0)
        else:
            pr.update(s, w)
            sc.update(y, s, w)
            cm.update(y, 1 if s >= threshold else 0, w)
    return pr.to_dict(), sc.to_dict(), cm.to_dict()


def monitor(threshold: float, max_bins: int) -> BinaryMonitor:
    m = BinaryMonitor(threshold=threshold)
    # a small budget reaches the grid and its coarsenings within a short stream
    m.predictions = ScoreDistribution(threshold=threshold, max_bins=max_bins)
    m.scores = BinaryScores(max_bins=max_bins)
    return m


def state(m: BinaryMonitor) -> tuple:
    return m.predictions.to_dict(), m.scores.to_dict(), m.confusion.to_dict()


scores = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False),
    st.sampled_from([0.0, 1.0, 0.5, 5e-324, 1e-20, 1.0 - 2.0**-53, 0.25, 0.75]),
    st.floats(-3.0, 3.0, allow_nan=False),  # margins: the accumulators' own paths
    st.integers(0, 1).map(float),
)
events = st.lists(st.fixed_dictionaries(
    {"y_true": st.sampled_from([0, 1, True, False]), "score": scores},
    optional={"weight": st.sampled_from([0.0, 0.5, 2.0, 1.0])}), max_size=300)


@settings(max_examples=60, deadline=None)
@given(events, st.sampled_from([0.5, 0.3]), st.sampled_from([4, 16, 4096]))
def test_update_builds_the_state_of_the_separate_accumulators(evs, threshold, max_bins):
    m = monitor(threshold, max_bins)
    for e in evs:
        m.update(e)
    assert state(m) == separate(evs, threshold, max_bins)


@settings(max_examples=40, deadline=None)
@given(events, st.sampled_from([4, 16, 4096]))
def test_update_event_builds_the_same_state_as_update(evs, max_bins):
    a, b = monitor(0.5, max_bins), monitor(0.5, max_bins)
    for e in evs:
        a.update(e)
        b.update_event(PARSER.parse(dict(e)))
    assert state(a) == state(b)


def test_a_long_stream_through_every_coarsening():
    rng = random.Random(7)
    evs = [{"y_true": rng.random() < 0.3, "score": rng.random()} for _ in range(30_000)]
    m = BinaryMonitor()
    for e in evs:
        m.update(e)
    assert m.scores.bins_per_octave is not None and m.scores.bins_per_octave < 1024
    assert state(m) == separate(evs, 0.5, 4096)


def test_predictions_on_a_finer_grid_than_the_scores():
    """Predictions awaiting labels fill the label-free histogram only: the two histograms are
    then on different grids (or one exact, one binned), and the fused path keys each on its own."""
    rng = random.Random(3)
    m, pr, sc = monitor(0.5, 16), ScoreDistribution(max_bins=16), BinaryScores(max_bins=16)
    cm = ConfusionMatrix(labels=[0, 1])
    grids = set()
    for i in range(400):
        s = rng.random()
        ev = PARSER.parse({"y_true": i % 2, "score": s})
        if i % 3 == 0:  # label-based part only: the scores' histograms fill faster
            m.update_outcome(ev)
            sc.update(i % 2, s)
            cm.update(i % 2, 1 if s >= 0.5 else 0)
        elif i % 3 == 1:
            m.update_prediction(ev)
            pr.update(s)
        else:
            m.update_event(ev)
            pr.update(s)
            sc.update(i % 2, s)
            cm.update(i % 2, 1 if s >= 0.5 else 0)
        grids.add((m.predictions.bins_per_octave, m.scores.bins_per_octave))
    assert any(p is None and s is not None for p, s in grids)  # predictions exact, scores binned
    assert any(p is not None and s is not None and p > s for p, s in grids)  # two grids
    assert state(m) == (pr.to_dict(), sc.to_dict(), cm.to_dict())


def test_exact_monitors_take_the_accumulators_paths():
    evs = [{"y_true": i % 2, "score": (i % 97) / 97 + 0.001} for i in range(500)]
    m = BinaryMonitor(exact=True)
    for e in evs:
        m.update(e)
    pr = ScoreDistribution(exact=True)
    for e in evs:
        pr.update(e["score"])
    assert m.predictions.to_dict() == pr.to_dict()
    assert m.scores.exact and m.count == 500


@pytest.mark.parametrize("n", [1, 5, SMALL_BATCH, SMALL_BATCH + 1, 200])
def test_small_batches_event_by_event_agree_with_the_vectorised_path(n):
    rng = random.Random(n)
    parsed = [PARSER.parse({"y_true": int(rng.random() < 0.4), "score": rng.random(),
                            **({"weight": 2.0} if i % 7 == 3 else {})}) for i in range(n)]
    batched = BinaryMonitor().update_events(parsed)
    one_by_one = BinaryMonitor()
    for e in parsed:
        one_by_one.update_event(e)
    if n <= SMALL_BATCH:  # the same path: the same state
        assert batched.to_dict() == one_by_one.to_dict()
    a, b = batched.snapshot(), one_by_one.snapshot()
    assert a.keys() == b.keys()
    for k, v in a.items():
        assert (v is None and b[k] is None) or math.isclose(v, b[k], rel_tol=1e-12, abs_tol=1e-12), k


@pytest.mark.parametrize("config", [{}, {"threshold": 0.7}, {"exact": True}])
def test_empty_copies_of_a_template_are_new_monitors(config):
    """BinaryMonitor.empty (the pipeline's monitor factory): equal to a constructed monitor,
    sharing no state with the template or each other, the same after the same events."""
    template = BinaryMonitor(**config)
    a, b = template.empty(), template.empty()
    assert a == BinaryMonitor(**config) and a.to_dict() == BinaryMonitor(**config).to_dict()
    assert sorted(vars(a)) == sorted(vars(BinaryMonitor(**config)))
    rng = random.Random(5)
    evs = [{"y_true": int(rng.random() < 0.5), "score": rng.random()} for _ in range(5000)]
    built = BinaryMonitor(**config)
    for e in evs:
        a.update(e)
        built.update(e)
    assert a.to_dict() == built.to_dict()
    assert template.count == b.count == 0 and template == BinaryMonitor(**config) == b
    with pytest.raises(ValueError, match="empty"):
        a.empty()


def test_the_pipeline_factory_makes_empty_binary_monitors():
    from streammetrics.stream.pipeline import PipelineConfig

    factory = PipelineConfig(threshold=0.25).monitor_factory()
    m1, m2 = factory(), factory()
    m1.update({"y_true": 1, "score": 0.3})
    assert m1.count == 1 and m2.count == 0 and m2 == BinaryMonitor(threshold=0.25)


@settings(max_examples=40, deadline=None)
@given(events, st.sampled_from([4, 16, 4096]))
def test_direct_state_encoding_is_the_declared_fields_encoding(evs, max_bins):
    """BinaryMonitor, BinaryScores, ScoreDistribution and ConfusionMatrix write their state
    directly (to_dict per snapshot); it is what the generic encoding of their declared fields
    gives, and a changed declaration switches them back to it (checked at import)."""
    from streammetrics.core.accumulator import Accumulator
    from streammetrics.metrics import binary_scores, confusion, score_distribution
    from streammetrics.monitors import binary

    assert binary_scores.DIRECT_STATE and score_distribution.DIRECT_STATE
    assert confusion._DIRECT_STATE and binary._DIRECT_STATE
    m = monitor(0.5, max_bins)
    for e in evs:
        m.update(e)
    for acc in (m, m.predictions, m.scores, m.confusion):
        direct = acc._parts_state() if acc is m else acc._state()  # (the monitor's parts layout)
        generic = Accumulator._state(acc)
        assert list(direct) == list(generic)
        assert json_text(direct) == json_text(generic)
    if max_bins == 4096:  # (the test monitors of other budgets are no configuration of BinaryMonitor)
        assert json_text(BinaryMonitor.from_dict(m.to_dict()).to_dict()) == json_text(m.to_dict())


def json_text(value) -> str:
    import json

    return json.dumps(value)


class _Int(int):
    """An int that is not one of CPython's cached small ints (the fused path tests 0 and 1 by identity)."""


def test_every_form_of_y_true_gives_the_state_of_the_plain_ints():
    import numpy as np

    rng = random.Random(11)
    evs = [{"y_true": rng.randint(0, 1), "score": rng.random()} for _ in range(6000)]  # through the grid
    forms = [lambda y: y, bool, float, np.int64, _Int]
    states = []
    for form in forms:
        m = BinaryMonitor()
        for e in evs:
            m.update({"y_true": form(e["y_true"]), "score": e["score"]})
        states.append(m.to_dict())
    assert all(s == states[0] for s in states)


@pytest.mark.parametrize("bad, field", [
    ({"y_true": 2, "score": 0.3}, "y_true"), ({"y_true": "1", "score": 0.3}, "y_true"),
    ({"y_true": 1, "score": "0.3"}, "score"), ({"y_true": 1}, "score"),
    ({"y_true": 1, "score": math.nan}, "score"), ({"score": 0.3}, "y_true"),
    ({"y_true": 1, "score": 0.3, "weight": -1.0}, "weight")])
def test_bad_events_on_the_grid_are_refused_naming_the_field_and_change_nothing(bad, field):
    rng = random.Random(2)
    m = BinaryMonitor()
    for _ in range(6000):
        m.update({"y_true": rng.randint(0, 1), "score": rng.random()})
    before = m.to_dict()
    with pytest.raises(ValueError, match=field) as info:
        m.update(bad)
    assert "\n" not in str(info.value)
    assert m.to_dict() == before


@pytest.mark.parametrize("own", ["update_prediction", "update_outcome", "read_predictions", "read_scores"])
@pytest.mark.parametrize("fused", ["update", "update_event"])
def test_the_exact_sum_buffers_stay_below_buffer_whichever_path_folds_one(fused, own):
    """The fused paths append to both exact-sum buffers (log-loss/Brier terms, score sum) and
    fold them together once either holds BUFFER terms; each accumulator's own paths (and a
    read) fold only their own. Here one own event comes just as the buffers fill, every cycle:
    a fused path testing one buffer only would let the other grow past BUFFER (without bound)."""
    from streammetrics.kernels.exact_sum import BUFFER

    rng = random.Random(5)
    m, pr, sc = BinaryMonitor(), ScoreDistribution(), BinaryScores()
    cm = ConfusionMatrix(labels=[0, 1])
    for i in range(10 * BUFFER):  # through the exact phase and onto the grid
        y, s = rng.randint(0, 1), rng.random()
        if i % BUFFER != BUFFER - 1:
            if fused == "update":
                m.update({"y_true": y, "score": s})
            else:
                m.update_event(PARSER.parse({"y_true": y, "score": s}))
            pr.update(s)
            sc.update(y, s)
            cm.update(y, 1 if s >= 0.5 else 0)
        elif own == "update_prediction":
            m.update_prediction(PARSER.parse({"y_true": y, "score": s}))
            pr.update(s)
        elif own == "update_outcome":
            m.update_outcome(PARSER.parse({"y_true": y, "score": s}))
            sc.update(y, s)
            cm.update(y, 1 if s >= 0.5 else 0)
        elif own == "read_predictions":
            m.predictions.mean_score()
        else:
            m.scores.log_loss()
        assert len(m.scores._sums.unit) < BUFFER and len(m.predictions._sums[1].terms) < BUFFER
    assert m.scores.bins_per_octave is not None and m.predictions.bins_per_octave is not None
    assert state(m) == (pr.to_dict(), sc.to_dict(), cm.to_dict())
