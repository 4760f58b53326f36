"""State cost of the Kafka service against its key count, in one run (issue: incremental state).

    python benchmarks/bench_state.py [--events 400000] [--keys 100000] [--windows 2] [--quick]
    python benchmarks/bench_state.py --windows 1      # no window closes while measured: state cost only
    python benchmarks/bench_state.py --profile /tmp/state.prof   # cProfile the many-key loop

Starts an embedded tansu broker and fills two topics with the same number of single-event
messages (binary task, keyed ``model|segment``, event times spread evenly over ``--windows``
60-second windows), one over 3 keys and one over ``--keys`` keys; then runs the service
(``consumers.service.MetricsService`` as ``streammetrics consume`` builds it: checkpoints every
second under a temporary state dir, the changelog topic, per-key gauges, snapshots published) over
each, from its first record until every event is applied, and prints events per CPU-second of
this process for each and their ratio (target: the many-key rate at least 0.5 of the 3-key rate:
``met`` / ``MISSED``), the window engine's own rates on the same messages (no Kafka:
:func:`engine_rate`) and the ratio the service would reach if it cost nothing more per key than at
3 keys, the resident memory the many-key state adds (per 100,000 keys), the last
checkpoint's size, and the time to restore a partition's state against its size (what an assignment
runs after a restart on the same state dir: its full checkpoint and deltas read and merged, the
changelog read back to its latest full checkpoint, the state loaded once; wall time), with two of
its parts timed alone: the state dir's read and the load.
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _targets import Target  # noqa: E402
from bench_kafka_baseline import produce  # noqa: E402

from consumers.broker import EmbeddedBroker, create_topics  # noqa: E402
from consumers.fastpath import BinaryFastPath  # noqa: E402
from consumers.service import RECORD_OVERHEAD, SNAPSHOT_KEY_ROOM, MetricsService, ServiceConfig, tune_gc  # noqa: E402
from streammetrics.stream.pipeline import Pipeline  # noqa: E402

T0 = 1_767_225_600.0
WINDOW = 60.0
TARGET = 0.5


def messages(n: int, keys: int, windows: int, seed: int = 3):
    """``n`` single-event messages over ``keys`` keys, times spread over ``windows`` windows."""
    rng = random.Random(seed)
    span = windows * WINDOW
    for i in range(n):
        k = rng.randrange(keys)
        model, segment = f"m{k % 97}", f"s{k}"
        ev = {"ts": round(T0 + span * i / n, 6), "model": model, "segment": segment,
              "y_true": rng.random() < 0.3, "score": round(rng.random(), 4)}
        ev["y_true"] = int(ev["y_true"])
        yield f"{model}|{segment}".encode(), json.dumps(ev, separators=(",", ":")).encode()


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def run_service(bootstrap: str, topic: str, events: int, profile: str | None = None,
                kafka: dict | None = None) -> dict:
    output = f"{topic}-out"
    create_topics(bootstrap, {output: 1})
    with tempfile.TemporaryDirectory() as state:
        config = ServiceConfig(bootstrap_servers=bootstrap, topic=topic, output_topic=output,
                               group_id=f"bench-{topic}", state_dir=state, idle_close=None, max_future=None,
                               changelog_topic=f"bench-{topic}-changelog", delivery_timeout=300.0,
                               kafka_options=dict(kafka or {}))
        create_topics(bootstrap, {config.changelog_topic: 1})
        service = MetricsService(config)
        rss0 = rss_bytes()
        service.start()
        counts = service.counts
        try:
            while counts["messages"] == 0:
                service.poll_once()
            profiler = cProfile.Profile() if profile else None
            start, cpu, main_cpu = time.perf_counter(), time.process_time(), time.thread_time()
            if profiler is not None:
                profiler.enable()
            while counts["events"] + counts["late"] + counts["rejected"] < events:
                service.poll_once()
            if profiler is not None:
                profiler.disable()
                profiler.dump_stats(profile)
            seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
            main_seconds = time.thread_time() - main_cpu
            samples = {s.name: s.value for m in service.metrics.checkpoint_seconds.collect() for s in m.samples}
            checkpoints = (int(samples.get("streammetrics_checkpoint_duration_seconds_count", 0)),
                           samples.get("streammetrics_checkpoint_duration_seconds_sum", 0.0))
            rss = rss_bytes() - rss0
            service.checkpoint()
            part = next(iter(service.partitions.values()))
            keys = part.pipeline.windows.key_count
            payload = service._saved_state(part) or b""  # noqa: SLF001 - the state a restore loads
            partition = part.tp.partition
            t = time.perf_counter()  # the parts: the state dir's chain read, decoded and merged; the state loaded
            assert service.store is not None and service.store.load(partition) is not None
            read = time.perf_counter() - t
            t = time.perf_counter()
            service._pipeline_from(payload, partition)  # noqa: SLF001 - what a restore loads
            load = time.perf_counter() - t
            t = time.perf_counter()  # what an assignment runs: the state dir's chain and the changelog's read,
            saved, pipeline = service._restore(partition)  # noqa: SLF001 - decoded where needed, merged
            if pipeline is None:  # (the state dir's won: loaded now, as MetricsService._assign does)
                assert saved is not None
                pipeline = service._pipeline_from(service.codec.encode(  # noqa: SLF001
                    partition, saved["offset"], saved["windows"], saved.get("label_offset")), partition)
            restore = time.perf_counter() - t
            assert pipeline.windows.key_count == keys
        finally:
            service.close()
    if counts["events"] != events:
        raise RuntimeError(f"service applied {counts['events']} of {events} events: {counts}")
    return {"events": events, "seconds": seconds, "cpu": cpu_seconds, "rate": events / cpu_seconds, "keys": keys,
            "main_cpu": main_seconds, "snapshots": counts["snapshots"], "checkpoints": checkpoints,
            "rss": rss, "checkpoint_bytes": len(payload), "restore_s": restore,
            "read_s": read, "load_s": load}


def engine_rate(events: int, keys: int, windows: int, chunk: int = 5000) -> float:
    """Events per CPU-second of the window engine alone on the same messages (no Kafka, no
    checkpoint, nothing published): the service's pipeline (``consume``'s settings, changes
    tracked), each message through the service's fast path and ``Pipeline.process_event`` (else
    ``Pipeline.process``), ``Pipeline.poll`` (closes windows, builds their snapshots) after each
    ``chunk`` messages. Its ratio between key counts bounds the service's from above."""
    config = ServiceConfig(bootstrap_servers="-", topic="-", output_topic="-", group_id="-", idle_close=None,
                           max_future=None)
    pipeline = Pipeline(config.pipeline_config(max_snapshot_bytes=1_048_576 - RECORD_OVERHEAD - SNAPSHOT_KEY_ROOM))
    pipeline.track_changes()
    fast, process, process_event = BinaryFastPath.for_pipeline(pipeline).event, pipeline.process, pipeline.process_event
    values = [value for _key, value in messages(events, keys, windows)]
    cpu = time.process_time()
    for start in range(0, events, chunk):
        for value in values[start:start + chunk]:
            event = fast(value)
            process(value) if event is None else process_event(event)
        pipeline.poll()
    return events / (time.process_time() - cpu)


def measure(events: int, keys: int, windows: int, profile: str | None = None,
            kafka: dict | None = None, echo: bool = True) -> dict:
    """Both runs of the service (3 keys, then ``keys``) on an embedded broker, each printed as it ends."""
    tune_gc()
    results = {}
    with EmbeddedBroker(host="127.0.0.1") as broker:
        bootstrap = broker.bootstrap_servers
        for n_keys in (3, keys):
            topic = f"state-{n_keys}-{os.getpid()}"
            create_topics(bootstrap, {topic: 1})
            produce(bootstrap, topic, messages(events, n_keys, windows))
            results[n_keys] = r = run_service(bootstrap, topic, events, profile if n_keys == keys else None, kafka)
            if echo:
                print(f"{n_keys:>7} keys: {r['rate']:>9,.0f} events per CPU-s ({r['events']:,} events, "
                      f"{r['cpu']:.1f} CPU-s, {r['main_cpu']:.1f} of them the loop's thread, {r['seconds']:.1f} s "
                      f"wall, {r['snapshots']:,} snapshots, {r['checkpoints'][0]} checkpoints taking "
                      f"{r['checkpoints'][1]:.1f} s wall); state RSS +{r['rss'] / 2**20:.0f} MiB; checkpoint "
                      f"{r['checkpoint_bytes'] / 1e6:.1f} MB; restore {r['restore_s'] * 1000:.0f} ms (its parts "
                      f"timed alone: state dir read {r['read_s'] * 1000:.0f} ms, load {r['load_s'] * 1000:.0f} ms) "
                      f"for {r['keys']:,} keys", flush=True)
    return results


#: the ratio when the target was set (issue 25: 0.09; 0.14 at full size after its first changes)
KNOWN = 0.14


def targets(quick: bool) -> list[Target]:
    """The many-key rate over the 3-key rate against 0.5 (for ``python -m benchmarks``; quick:
    40,000 events over 10,000 keys, else 400,000 over 100,000)."""
    events, keys = (40_000, 10_000) if quick else (400_000, 100_000)
    results = measure(events, keys, 2)
    return [Target("bench_state", f"consume events per CPU-s, {keys:,} keys / 3 keys (broker, checkpoints, "
                   "changelog, snapshots published)", TARGET, results[keys]["rate"] / results[3]["rate"],
                   note="smoke size" if quick else "", known=KNOWN)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=400_000)
    ap.add_argument("--keys", type=int, default=100_000)
    ap.add_argument("--windows", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="40,000 events over 10,000 keys")
    ap.add_argument("--profile", metavar="PATH", default=None,
                    help="cProfile the many-key run's loop (its main thread) into PATH (python -m pstats PATH)")
    ap.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                    help="a kafka-python client setting for the service, as consume --kafka (e.g. linger_ms=5 "
                         "batch_size=16384: the producer settings before issue 25)")
    args = ap.parse_args()
    from consumers.command import kafka_options

    if args.quick:
        args.events, args.keys = 40_000, 10_000
    results = measure(args.events, args.keys, args.windows, args.profile, kafka_options(args.kafka))
    many, few = results[args.keys], results[3]
    ratio = many["rate"] / few["rate"]
    verdict = "met" if ratio >= TARGET else "MISSED"
    print(f"ratio {args.keys:,} keys / 3 keys: {ratio:.2f} (target >= {TARGET}: {verdict})")
    engine = {keys: engine_rate(args.events, keys, args.windows) for keys in (3, args.keys)}
    # the service's per-event cost beyond the engine's, at 3 keys (polling, decoding, bookkeeping): if the
    # service added nothing more at many keys, its ratio would be (e3 + k) / (e_many + k)
    k = max(1.0 / few["rate"] - 1.0 / engine[3], 0.0)
    ceiling = (1.0 / engine[3] + k) / (1.0 / engine[args.keys] + k)
    print(f"window engine alone (engine_rate, no Kafka): {engine[3]:,.0f} events per CPU-s at 3 keys, "
          f"{engine[args.keys]:,.0f} at {args.keys:,} keys: ratio {engine[args.keys] / engine[3]:.2f}; with the "
          f"service's 3-key cost per event beyond it ({k * 1e6:.1f} us) and nothing more per key: {ceiling:.2f}")
    print(f"RSS per 100,000 keys: {(many['rss'] - few['rss']) / 2**20 * 100_000 / args.keys:.0f} MiB; "
          f"restore {many['restore_s'] * 1000:.0f} ms for {many['checkpoint_bytes'] / 1e6:.1f} MB "
          f"({few['restore_s'] * 1000:.1f} ms for {few['checkpoint_bytes'] / 1e3:.1f} kB)")


if __name__ == "__main__":
    main()
