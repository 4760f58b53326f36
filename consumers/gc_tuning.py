"""Garbage-collector settings for the long-running ``consume`` process."""
from __future__ import annotations

import gc

__all__ = ["tune_gc"]


def tune_gc() -> None:
    """Garbage-collector settings for a long-running consume process.

    The loop allocates several short-lived containers per event (decoded JSON, the event) while
    window state (histograms, queued events) lives for minutes; with the default thresholds the
    collector rescans that state every few thousand events. ``gc.freeze()`` moves everything
    alive at start-up to the permanent generation, and the youngest generation is collected every
    20,000 allocations instead of 700 (at most a few MB of garbage cycles wait longer).
    """
    gc.freeze()
    gen0, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(max(gen0, 20_000), max(gen1, 50), max(gen2, 50))
