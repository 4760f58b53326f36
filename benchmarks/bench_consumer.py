"""End-to-end throughput of the Kafka service against a bare kafka-python loop, in one run.

    python benchmarks/bench_consumer.py [--messages 200000] [--batched-events 1000000] [--quick]

Starts an embedded tansu broker, fills a topic with single-event messages and one with JSON
arrays of 100 events (``benchmarks/bench_kafka_baseline.py``), then reads each topic

* with the bare loop: poll and ``json.loads`` only;
* with the service (``consumers.service.MetricsService``, binary task, 60 s windows,
  checkpoints every second under a temporary state dir, snapshots published): from its first
  record until every event has been applied.

Both use the same fetch settings (``max_poll_records`` and ``FETCH_SETTINGS``) and the same
garbage-collector settings (those of ``streammetrics consume``); the ratio is service events/s over bare events/s, best of
``--repeat`` interleaved runs each.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kafka_baseline import (  # noqa: E402
    bare_consume,
    crc32c_implementation,
    fill_batched_events,
    fill_single_events,
)

from consumers.broker import EmbeddedBroker, create_topics  # noqa: E402
from consumers.service import FETCH_SETTINGS, MetricsService, ServiceConfig, tune_gc  # noqa: E402


#: the fetch settings the service uses (consumers.service.consumer_settings / ServiceConfig)
SAME_SETTINGS = {"max_poll_records": ServiceConfig.max_poll_records, **FETCH_SETTINGS}


def service_rate(bootstrap: str, topic: str, events: int, run: int) -> float:
    """Events/s of the service over ``topic``, first record to last event applied."""
    output = f"{topic}-snapshots-{run}"
    create_topics(bootstrap, {output: 1})
    with tempfile.TemporaryDirectory() as state:
        config = ServiceConfig(bootstrap_servers=bootstrap, topic=topic, output_topic=output,
                               group_id=f"bench-{topic}-{run}", state_dir=state, idle_close=None)
        # the service's own loop (MetricsService.run is start + poll_once until stopped), driven
        # here on the main thread, like the bare loop, so the clock adds no thread switches
        service = MetricsService(config).start()
        counts = service.counts
        try:
            while counts["messages"] == 0:
                service.poll_once()
            start = time.perf_counter()
            while counts["events"] + counts["late"] + counts["rejected"] < events:
                service.poll_once()
            seconds = time.perf_counter() - start
            service.checkpoint()
        finally:
            service.close()
    if counts["events"] != events:
        raise RuntimeError(f"service applied {counts['events']} of {events} events: {counts}")
    return events / seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--batched-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_single = 20_000 if args.quick else args.messages
    n_batched = 100_000 if args.quick else args.batched_events
    repeat = 1 if args.quick else args.repeat
    tune_gc()  # as `streammetrics consume` does; process-wide, so the bare loop gets it too
    rows = []
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        for name, filled in (("single-event messages", fill_single_events(bootstrap, "bench-single", n_single)),
                             ("arrays of 100 events", fill_batched_events(bootstrap, "bench-batched", n_batched))):
            bare_runs, our_runs = [], []
            for run in range(repeat):  # interleaved, so that load from elsewhere hits both alike
                bare_runs.append(bare_consume(bootstrap, filled.topic, filled.events, **SAME_SETTINGS).events_per_s)
                our_runs.append(service_rate(bootstrap, filled.topic, filled.events, run))
            bare, ours = max(bare_runs), max(our_runs)
            rows.append((name, filled.events, bare, ours))
            print(f"{name}: bare loop {', '.join(f'{r:,.0f}' for r in bare_runs)} ev/s; "
                  f"service {', '.join(f'{r:,.0f}' for r in our_runs)} ev/s", flush=True)
    print(f"record CRC32C in {crc32c_implementation()}; best of {repeat}")
    print(f"{'topic':<24}{'events':>10}{'bare loop ev/s':>16}{'service ev/s':>14}{'ratio':>7}")
    for name, events, bare, ours in rows:
        print(f"{name:<24}{events:>10,}{bare:>16,.0f}{ours:>14,.0f}{ours / bare:>7.2f}")


if __name__ == "__main__":
    main()
