"""The order-freedom check the exact-sum tests share (contract section 1): an accumulator's
state, as JSON bytes, depends only on the multiset of its events."""
from __future__ import annotations

import json
import random
from typing import Any, Callable

import streammetrics as sm

#: ``feed(acc, events, batch)``: apply ``events`` (as one batch when ``batch``), return ``acc``
Feed = Callable[[Any, list, bool], Any]


def state_bytes(acc: Any) -> str:
    return json.dumps(acc.to_dict(), sort_keys=True)


def check_order_free(make: Callable[[], Any], evs: list, feed: Feed, seed: int, rounds: int = 3) -> Any:
    """Per-event, batch, random splits (each fed per event or as a batch) merged in random
    order, and the dict round trip: the same JSON bytes. ``feed(acc, events, batch)`` applies
    ``events`` (as one batch when ``batch``) and returns ``acc``. Returns the per-event one."""
    rng = random.Random(seed)
    whole = feed(make(), evs, False)
    want = state_bytes(whole)
    assert state_bytes(feed(make(), evs, True)) == want
    for _ in range(rounds):
        shuffled = list(evs)
        rng.shuffle(shuffled)
        parts = [make() for _ in range(rng.randint(2, 5))]
        for i, part in enumerate(parts):
            feed(part, shuffled[i::len(parts)], rng.random() < 0.5)
        rng.shuffle(parts)
        while len(parts) > 1:
            j = rng.randrange(len(parts) - 1)
            parts[j : j + 2] = [parts[j] + parts[j + 1]]
        assert state_bytes(parts[0]) == want
    back = sm.from_dict(json.loads(want))
    assert state_bytes(back) == want and back == whole
    return whole


def per_event_or_batch(one: Callable[[Any, Any], Any], many: Callable[[Any, list], Any]) -> Feed:
    """A ``feed`` for :func:`check_order_free` from an update of one event and one of a batch."""
    def feed(acc: Any, evs: list, batch: bool) -> Any:
        if batch:
            many(acc, evs)
        else:
            for e in evs:
                one(acc, e)
        return acc
    return feed


def check_mode_merges(make: Callable[[], Any], whole_evs: list, any_evs: list, feed: Feed) -> None:
    """An accumulator of whole weights (float sums) and one of any weights (exact units)
    merged in both orders, by ``+`` (copies) and ``merge`` (in place): the state of all the
    events fed to one, and a side merged in is not converted."""
    a, b = feed(make(), whole_evs, False), feed(make(), any_evs, True)
    assert not a._units and b._units
    want = state_bytes(feed(feed(make(), any_evs, False), whole_evs, True))
    a_before, b_before = state_bytes(a), state_bytes(b)
    assert state_bytes(a + b) == state_bytes(b + a) == want
    assert state_bytes(a) == a_before and state_bytes(b) == b_before and not a._units  # __add__ copies
    a.merge(b)
    assert a._units and state_bytes(a) == want and state_bytes(b) == b_before
    c = feed(make(), whole_evs, True)
    b.merge(c)
    assert state_bytes(b) == want and not c._units  # c was not converted
