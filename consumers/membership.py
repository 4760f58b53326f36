"""How long a consumer-group member has been (re-)joining its group, and when to force a rejoin.

Measured on tansu 0.6.0 with bare kafka-python 3.0.12 members (consumers/NOTES.md, docs/scaleout.md
"Liveness"): a member that leaves (LeaveGroup) while its JoinGroup is pending can be made the leader
of the next generation after it left. The other members then join as followers, wait for a
SyncGroup that no leader answers, fail it with ``REBALANCE_IN_PROGRESS`` and join again, every
~8 s, with no partition assigned to anyone, for 50 s to more than 120 s. Two measures in the
service, one per side of that defect:

* a member that stops waits, at most ``leave_wait`` seconds, for a rebalance in progress to
  finish before it leaves (:meth:`GroupWatch.settled`), so that it does not cause the stall;
* a member that has been rebalancing for ``rejoin_after`` seconds leaves and joins again with a
  new consumer (:meth:`GroupWatch.due`; counted in ``streammetrics_forced_rejoins_total``): a
  member stuck in a join gets a fresh one. Against the tansu stall above it was not shown to help
  (benchmarks/bench_leave_stall.py ``recreate``: stalls still lasted 26 s to more than 120 s).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

__all__ = ["GroupWatch"]

log = logging.getLogger("streammetrics.consume")


class GroupWatch:
    """Watches one consumer's membership through ``stable(consumer)`` (True: a member of a stable
    generation; False: (re-)joining; None: cannot tell, never acted on;
    :func:`consumers.clients.group_stable` for kafka-python).

    >>> now = [0.0]
    >>> watch = GroupWatch("input", rejoin_after=30.0, clock=lambda: now[0], stable=lambda c: c)
    >>> watch.due(False), watch.due(True)
    (False, False)
    >>> now[0] = 29.9; watch.due(False)
    False
    >>> now[0] = 30.0; watch.due(False), watch.rejoins
    (True, 1)
    """

    def __init__(self, group: str, rejoin_after: float | None, *, clock: Callable[[], float] = time.monotonic,
                 stable: Callable[[Any], bool | None] | None = None) -> None:
        if stable is None:
            from .clients import group_stable

            stable = group_stable
        self.group = group
        #: seconds of continuous rebalancing after which :meth:`due` says rejoin (None or 0: never)
        self.rejoin_after = rejoin_after or None
        self._clock = clock
        self._stable = stable
        self.since = clock()  # since when the member has not been in a stable generation
        self.rejoins = 0

    def stable(self, consumer: Any) -> bool | None:
        return self._stable(consumer)

    def due(self, consumer: Any) -> bool:
        """True (once per ``rejoin_after``) when the member has been rebalancing that long."""
        now = self._clock()
        if self._stable(consumer) is not False:
            self.since = now
            return False
        if self.rejoin_after is None or now - self.since < self.rejoin_after:
            return False
        self.since = now
        self.rejoins += 1
        return True

    def rejoined(self) -> None:
        """A new consumer has just subscribed: it has its first join ahead of it."""
        self.since = self._clock()

    def replace(self, consumer: Any, factory: Callable[[], Any] | None, subscribe: Callable[[Any], Any],
                close_timeout: float) -> Any | None:
        """The forced rejoin, once :meth:`due`: ``consumer`` closed without committing (its
        partitions resume from their checkpoints), a new one from ``factory``, ``subscribe(new)``;
        the new consumer, or None (logged) when there is no factory (an injected client)."""
        if factory is None:
            log.warning("%s group: this member has been rebalancing for %g s; no new consumer can be made here "
                        "(injected client), waiting on", self.group, self.rejoin_after)
            return None
        log.warning("%s group: this member has been rebalancing for %g s with no assignment completing: leaving "
                    "and joining again with a new consumer (forced rejoin %d)", self.group, self.rejoin_after,
                    self.rejoins)
        try:
            consumer.close(autocommit=False, timeout_ms=int(close_timeout * 1000))
        except Exception as exc:  # noqa: BLE001 - the old member is abandoned either way
            log.warning("%s group: closing the stuck consumer failed: %s", self.group, exc)
        new = factory()
        subscribe(new)
        self.rejoined()
        return new

    def settled(self, consumer: Any, poll: Callable[[], Any], leave_wait: float,
                stopped: Callable[[], bool] = lambda: False) -> bool:
        """Before leaving: call ``poll()`` while the member is rebalancing, for at most
        ``leave_wait`` seconds (or until ``stopped()``); True if it is not rebalancing at the end."""
        deadline = self._clock() + leave_wait
        while self._stable(consumer) is False and self._clock() < deadline and not stopped():
            poll()
        return self._stable(consumer) is not False
