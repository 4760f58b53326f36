"""A member leaving a consumer group mid-rebalance, against the embedded broker (tansu), with bare
kafka-python members (no service code): docs/scaleout.md, "Liveness".

Three members of a 6-partition topic, each polled in its own thread; a fourth joins; 1 s after the
first member sees the rebalance start, that member closes (LeaveGroup) while its JoinGroup is
pending. Printed per run: seconds from the close to a stable group owning all 6 partitions (120 at
most). Variants of what the members do:

* ``base``: nothing;
* ``graceful``: the leaving member first polls until its generation is complete (at most 15 s), as
  the service's ``leave_wait`` does;
* ``recreate``: a member rebalancing for 15 s closes its consumer and joins with a new one, as the
  service's ``--rejoin-after`` does;
* ``resub``: the same with ``unsubscribe()`` + ``subscribe()`` on the same consumer;
* ``abandon``: the same without LeaveGroup (the generation forgotten first).

    python benchmarks/bench_leave_stall.py base 5
"""
from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kafka import KafkaConsumer  # noqa: E402  (after the path set-up)

from consumers.broker import EmbeddedBroker, create_topics  # noqa: E402
from consumers.clients import group_stable  # noqa: E402
from consumers.settings import consumer_settings  # noqa: E402

LIMIT = 15.0  # s of rebalancing before a remedy, and most a graceful close waits


class Member:
    def __init__(self, bootstrap: str, topic: str, group: str, variant: str) -> None:
        self.variant = variant
        self.options = {"bootstrap_servers": bootstrap, "group_id": group, **consumer_settings()}
        self.topic = topic
        self.consumer = KafkaConsumer(topic, **self.options)
        self.partitions: frozenset[int] = frozenset()
        self.remedies = 0
        self.since = time.monotonic()
        self._stop = threading.Event()
        self._leave = False
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stable(self) -> bool:
        return bool(group_stable(self.consumer))

    def _run(self) -> None:
        while not self._stop.is_set():
            self.consumer.poll(timeout_ms=100)
            stable = self.stable()
            self.partitions = frozenset(tp.partition for tp in self.consumer.assignment()) if stable else frozenset()
            now = time.monotonic()
            if stable:
                self.since = now
            elif now - self.since > LIMIT and self.variant in ("recreate", "resub", "abandon"):
                self.remedies += 1
                if self.variant == "resub":
                    self.consumer.unsubscribe()
                    self.consumer.subscribe([self.topic])
                else:
                    if self.variant == "abandon":
                        self.consumer._coordinator.reset_generation()  # no LeaveGroup on close
                    self.consumer.close(autocommit=False, timeout_ms=3000)
                    self.consumer = KafkaConsumer(self.topic, **self.options)
                self.since = time.monotonic()
        if self._leave:
            if self.variant == "graceful":
                end = time.monotonic() + LIMIT
                while not self.stable() and time.monotonic() < end:
                    self.consumer.poll(timeout_ms=100)
            self.consumer.close(autocommit=False, timeout_ms=3000)

    def stop(self, leave: bool = True) -> None:
        self._leave = leave
        self._stop.set()
        self._thread.join(30)


def run(bootstrap: str, variant: str, n: int) -> dict:
    topic, group = f"stall-{n}-{time.time_ns()}", f"stall-{n}-{time.time_ns()}"
    create_topics(bootstrap, {topic: 6})
    members = [Member(bootstrap, topic, group, variant) for _ in range(3)]
    deadline = time.monotonic() + 60
    while not (sorted(p for m in members for p in m.partitions) == list(range(6))) and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(2)
    members.append(Member(bootstrap, topic, group, variant))
    deadline = time.monotonic() + 10
    while all(m.stable() for m in members[:3]) and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(1.0)
    left = time.monotonic()
    members[0].stop()
    live = members[1:]
    while time.monotonic() - left < 120:
        if sorted(p for m in live for p in m.partitions) == list(range(6)) and all(m.stable() for m in live):
            break
        time.sleep(0.05)
    out = {"variant": variant, "run": n, "stable_after_leave_s": round(time.monotonic() - left, 1),
           "remedies": [m.remedies for m in live]}
    for m in live:
        m.stop()
    return out


def main() -> None:
    variant, runs = (sys.argv[1] if len(sys.argv) > 1 else "base"), int(sys.argv[2] if len(sys.argv) > 2 else 5)
    with EmbeddedBroker(host="127.0.0.1") as broker:
        for n in range(runs):
            print(json.dumps(run(broker.bootstrap_servers, variant, n)), flush=True)


if __name__ == "__main__":
    main()
