"""``--no-state`` takes the vectorised close of many small windows too (issue 24, point 3): the
snapshots equal those built window by window, without their state."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
from test_windows_fleet import items, run  # (pytest puts this folder on sys.path)

from streammetrics.stream.pipeline import Pipeline, PipelineConfig


def test_no_state_windows_are_built_together():
    stream = [{"ts": t * 0.5, "model": f"m{t % 37}", "y_true": t % 3 == 0, "score": ((t * 7919) % 997 + 1) / 999}
              for t in range(2000)]
    pipeline = Pipeline(PipelineConfig(window=10.0, max_future=None, include_state=False))
    for e in stream:
        pipeline.process(json.dumps(e))
    assert pipeline.windows.deferred_count > 0
    snaps = pipeline.poll() + pipeline.flush()
    assert snaps and all("state" not in s for s in snaps)


@settings(max_examples=60, deadline=None)
@given(items, st.sampled_from([10.0, 30.0]), st.sampled_from([0.0, 5.0]), st.sampled_from([4096, 3]))
def test_no_state_deferred_windows_equal_windows_built_one_by_one(stream, window, grace, max_pending):
    config = PipelineConfig(window=window, grace=grace, max_pending=max_pending, max_future=None,
                            include_state=False)
    fleet = run([dict(i) if isinstance(i, dict) else i for i in stream], True, config)
    assert fleet == run([dict(i) if isinstance(i, dict) else i for i in stream], False, config)
    assert fleet == run([dict(i) if isinstance(i, dict) else i for i in stream], "lines", config)
    assert all('"state"' not in line for line in fleet)
