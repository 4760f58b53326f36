"""End-to-end throughput of the Kafka service against a bare kafka-python loop, in one run.

    python benchmarks/bench_consumer.py [--messages 200000] [--batched-events 1000000] [--quick]

Starts an embedded tansu broker, fills a topic with single-event messages and one with JSON
arrays of 100 events (``benchmarks/bench_kafka_baseline.py``), then reads each topic

* with the bare loop: poll and decode only, with the decoder the service uses (msgspec's
  ``msgspec.json.Decoder().decode`` when the ``fast`` extra is installed: the ratio's baseline),
  with msgspec's typed decoder of the service's fast path (``bare loop, msgspec typed``:
  :func:`consumers.fastpath.plain_event_decoder`, falling back to the generic decoder for what
  it refuses, e.g. arrays; faster than decoding into dicts, so also printed as a second, stricter
  baseline) and with ``json.loads`` (labelled as such);
* with the service (``consumers.service.MetricsService``, binary task, 60 s windows,
  checkpoints every second under a temporary state dir, snapshots published): from its first
  record until every event has been applied; when msgspec is installed, once as configured
  (ratio to the msgspec bare loop), once with kafka-python's own record unpacking instead of
  :mod:`consumers.lean_records` (``service, kafka-python rec.``, same baseline) and once with
  msgspec turned off ("json only", ratio to the ``json.loads`` bare loop).

The ratio's baseline is kafka-python as shipped: ``KafkaConsumer.poll`` and the decoder, nothing
else. The service's consumer unpacks plain record batches with :mod:`consumers.lean_records`
(the same ``ConsumerRecord`` tuples, about 3.5 us cheaper per record than kafka-python's loop),
which any kafka-python reader could adopt; so ``bare loop, msgspec, lean`` is that bare loop with
it too, printed with the service's ratio over it (the service's own cost per event, apart from
record unpacking).

Both use the same kafka-python fetch settings: ``max_poll_records=5000``
(``ServiceConfig.max_poll_records``) and ``fetch_max_wait_ms=100`` (``FETCH_SETTINGS``), every
other fetch setting at kafka-python's default (``fetch_min_bytes=1``, ``fetch_max_bytes`` 50 MB,
``max_partition_fetch_bytes`` 1 MB, ``check_crcs=True``); the service's consumer adds only group
settings (``consumer_settings``: session and heartbeat timeouts, manual commits), the bare loop
reads its partitions by ``assign`` without a group. Both run under the same garbage-collector
settings (those of ``streammetrics consume``). Reported: events/s on the wall
clock (the target: service over bare loop) and events per CPU-second of this process, best of
``--repeat`` interleaved runs each. The wall clock includes the reads' idle time, when the
consumer waits for the broker's fetch responses; it varies between runs of the same reader
(kafka-python keeps one fetch per broker in flight, see ``consumers/NOTES.md``), hence best-of
and the CPU figures, which vary little. The best wall-clock and the best CPU figure of a reader
may come from different runs.
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_kafka_baseline import (
    ReadRate,
    bare_consume,
    crc32c_implementation,
    fill_batched_events,
    fill_single_events,
)

from consumers.broker import EmbeddedBroker, create_topics
from consumers.fastpath import plain_event_decoder
from consumers.service import MetricsService, ServiceConfig, tune_gc
from consumers.settings import FETCH_SETTINGS
from streammetrics.events.parser import EventParser

#: the fetch settings the service uses (consumers.service.consumer_settings / ServiceConfig)
SAME_SETTINGS = {"max_poll_records": ServiceConfig.max_poll_records, **FETCH_SETTINGS}


def service_rate(bootstrap: str, topic: str, events: int, run: str, *, json_only: bool = False,
                 lean_records: bool = True) -> ReadRate:
    """The service's read of ``topic``, first record to last event applied; ``json_only`` turns
    off the msgspec decoder (the ``fast`` extra) if it is installed; ``lean_records=False``:
    kafka-python's own record unpacking instead of :mod:`consumers.lean_records`."""
    output = f"{topic}-snapshots-{run}"
    create_topics(bootstrap, {output: 1})
    with tempfile.TemporaryDirectory() as state:
        config = ServiceConfig(bootstrap_servers=bootstrap, topic=topic, output_topic=output,
                               group_id=f"bench-{topic}-{run}", state_dir=state, idle_close=None,
                               lean_records=lean_records)
        # the service's own loop (MetricsService.run is start + poll_once until stopped), driven
        # here on the main thread, like the bare loop, so the clock adds no thread switches
        service = MetricsService(config)
        if json_only:
            service.parser.fast_decode = None
        service.start()
        counts = service.counts
        try:
            while counts["messages"] == 0:
                service.poll_once()
            start, cpu_start = time.perf_counter(), time.process_time()
            while counts["events"] + counts["late"] + counts["rejected"] < events:
                service.poll_once()
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
            service.checkpoint()
        finally:
            service.close()
    if counts["events"] != events:
        raise RuntimeError(f"service applied {counts['events']} of {events} events: {counts}")
    return ReadRate(events, counts["messages"], seconds, cpu_seconds)


def typed_decoder(generic: Any) -> Any:
    """The service fast path's decoding: msgspec's typed decoder of a plain binary event, the
    generic decoder for whatever that one refuses."""
    typed = plain_event_decoder()

    def decode(value: bytes) -> Any:
        try:
            return typed(value)
        except Exception:  # noqa: BLE001 - e.g. an array of events
            return generic(value)
    return decode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--batched-events", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_single = 20_000 if args.quick else args.messages
    n_batched = 100_000 if args.quick else args.batched_events
    repeat = 1 if args.quick else args.repeat
    tune_gc()  # as `streammetrics consume` does; process-wide, so the bare loop gets it too
    fast_decode = EventParser("binary").fast_decode
    fast = fast_decode is not None
    # reader -> (service json_only flag or None for a bare loop, decoder, name of its baseline,
    # consumers.lean_records on)
    readers: dict[str, tuple[bool | None, Any, str, bool]] = {
        "bare loop, json.loads": (None, json.loads, "", False)}
    if fast:
        readers = {"bare loop, msgspec": (None, fast_decode, "", False),
                   "bare loop, msgspec typed": (None, typed_decoder(fast_decode), "", False), **readers,
                   "bare loop, msgspec, lean": (None, fast_decode, "", True),
                   "service": (False, None, "bare loop, msgspec", True),
                   "service, kafka-python rec.": (False, None, "bare loop, msgspec", False),
                   "service, json only": (True, None, "bare loop, json.loads", True)}
    else:
        readers["service (json only)"] = (True, None, "bare loop, json.loads", True)
    rows = []
    with EmbeddedBroker() as broker:
        bootstrap = broker.bootstrap_servers
        for name, filled in (("single-event messages", fill_single_events(bootstrap, "bench-single", n_single)),
                             ("arrays of 100 events", fill_batched_events(bootstrap, "bench-batched", n_batched))):
            runs: dict[str, list[ReadRate]] = {r: [] for r in readers}
            for run in range(repeat):  # interleaved, so that load from elsewhere hits all alike
                for i, (reader, (json_only, decode, _, lean)) in enumerate(readers.items()):
                    if json_only is None:
                        read = bare_consume(bootstrap, filled.topic, filled.events, decode=decode,
                                            lean_records=lean, **SAME_SETTINGS)
                    else:
                        read = service_rate(bootstrap, filled.topic, filled.events, f"{run}-{i}",
                                            json_only=json_only, lean_records=lean)
                    runs[reader].append(read)
            for reader, reads in runs.items():
                print(f"{name}, {reader}: {', '.join(f'{r.events_per_s:,.0f}' for r in reads)} ev/s; "
                      f"{', '.join(f'{r.events_per_cpu_s:,.0f}' for r in reads)} ev/CPU-s", flush=True)
            for reader, reads in runs.items():
                base = readers[reader][2] or reader
                bare = max(r.events_per_s for r in runs[base])
                bare_cpu = max(r.events_per_cpu_s for r in runs[base])
                rate, cpu_rate = max(r.events_per_s for r in reads), max(r.events_per_cpu_s for r in reads)
                rows.append((name, filled.events, reader, rate, rate / bare, cpu_rate, cpu_rate / bare_cpu))
    print(f"\nrecord CRC32C in {crc32c_implementation()}; msgspec {'installed' if fast else 'not installed'}; "
          f"best of {repeat} (wall and CPU each); ratio = over the bare loop with the same decoder; "
          "CPU = this process, all threads")
    print(f"{'topic':<24}{'events':>10}  {'reader':<28}{'events/s':>11}{'ratio':>7}{'events/CPU-s':>14}{'ratio':>7}")
    for name, events, reader, rate, ratio, cpu_rate, cpu_ratio in rows:
        print(f"{name:<24}{events:>10,}  {reader:<28}{rate:>11,.0f}{ratio:>7.2f}{cpu_rate:>14,.0f}{cpu_ratio:>7.2f}")
    for other in ("bare loop, msgspec typed", "bare loop, msgspec, lean"):
        base = {name: cpu_rate for name, _, reader, _, _, cpu_rate, _ in rows if reader == other}
        for name, _, reader, _, _, cpu_rate, _ in rows:
            if reader == "service" and name in base:
                print(f"{name}: service over the {other.removeprefix('bare loop, ')} bare loop "
                      f"{cpu_rate / base[name]:.2f} (CPU)")


if __name__ == "__main__":
    main()
