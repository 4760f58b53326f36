"""Garbage-collector settings for the long-running ``consume`` process."""
from __future__ import annotations

import gc

from streammetrics.stream.replay import paused_gc

__all__ = ["GC_THRESHOLD", "paused_gc", "tune_gc"]

#: allocations (net, of containers) between two collections of the youngest generation; as
#: ``streammetrics replay`` (``streammetrics.stream.replay.REPLAY_GC_THRESHOLD``)
GC_THRESHOLD = 100_000


def tune_gc() -> None:
    """Garbage-collector settings for a long-running consume process.

    The loop allocates several short-lived containers per event (decoded JSON, the event) while
    window state (histograms, queued events) lives for minutes; with the default thresholds the
    collector rescans that state every few thousand events. ``gc.freeze()`` moves everything
    alive at start-up to the permanent generation, and the youngest generation is collected every
    :data:`GC_THRESHOLD` allocations instead of 700 (at most ~100,000 containers of garbage
    cycles, some 10-20 MB, wait longer; the loop makes almost none).
    """
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, GC_THRESHOLD), max(gen1, 50), max(gen2, 50))
