"""``streammetrics demo``: everything end to end on one machine.

1. start a local Kafka-protocol broker (tansu, memory storage, free loopback port) unless
   ``--bootstrap-servers`` names one;
2. create the topics and produce synthetic predictions from models whose quality drifts
   (:mod:`streammetrics.stream.synthetic`), keyed ``model|segment``, paced at ``--rate`` events/s,
   plus a few malformed messages that end up in the dead-letter topic;
3. run the service (:class:`consumers.service.MetricsService`) in a thread;
4. read the snapshot topic and print one line per closed window as it is published;
5. stop everything and print a summary (and write an HTML report with ``--report``).
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from typing import Any, TextIO

from streammetrics.stream.synthetic import DEFAULT_START, generate_events

__all__ = ["run_demo", "produce_events", "format_row", "HEADER"]

BAD_MESSAGES = [
    b"{not json",
    json.dumps({"ts": 1767225700, "model": "fraud-v1", "segment": "web", "y_true": 1}).encode(),
    json.dumps({"ts": 1767225700, "model": "fraud-v1", "segment": "web", "y_true": 3, "score": 0.4}).encode(),
]

#: partitions of the demo's input topic
INPUT_PARTITIONS = 3
#: alert rules of the demo's report
DEMO_ALERTS = ("roc_auc<0.85", "log_loss>0.6")

HEADER = (f"{'window (UTC)':<13} {'model':<9} {'segment':<7} {'events':>6}  {'ROC AUC':>7} {'[bounds]':<17} "
          f"{'F1':>5} {'prec':>5} {'recall':>6} {'logloss':>7} {'brier':>6}")


def _fmt(value: Any, width: int, digits: int = 3) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}.{digits}f}"


def format_row(snap: dict[str, Any]) -> str:
    """One compact line for a snapshot: window, key, count and the main metrics."""
    m = snap["metrics"]
    start = datetime.fromtimestamp(snap["window"]["start"], timezone.utc).strftime("%H:%M")
    end = datetime.fromtimestamp(snap["window"]["end"], timezone.utc).strftime("%H:%M")
    if m.get("roc_auc_low") is None:
        bounds = "-"
    else:
        bounds = f"[{m['roc_auc_low']:.4f},{m['roc_auc_high']:.4f}]"
    return (f"{start}-{end:<7} {snap['key']['model']:<9} {snap['key']['segment']:<7} {snap['count']:>6}  "
            f"{_fmt(m.get('roc_auc'), 7, 4)} {bounds:<17} {_fmt(m.get('f1'), 5)} {_fmt(m.get('precision'), 5)} "
            f"{_fmt(m.get('recall'), 6)} {_fmt(m.get('log_loss'), 7)} {_fmt(m.get('brier_score'), 6)}")


def produce_events(bootstrap: str, topic: str, n: int, duration: float, rate: float,
                   stop: threading.Event | None = None, bad: bool = True) -> int:
    """Produce ``n`` synthetic events keyed ``model|segment`` at about ``rate`` per second."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    started = time.monotonic()
    sent = 0
    try:
        for i, ev in enumerate(generate_events(n, duration=duration, seed=2026)):
            if stop is not None and stop.is_set():
                break
            key = f"{ev['model']}|{ev['segment']}".encode()
            producer.send(topic, key=key, value=json.dumps(ev, separators=(",", ":")).encode())
            sent += 1
            if bad and i in (n // 4, n // 2, 3 * n // 4):
                producer.send(topic, key=b"fraud-v1|web", value=BAD_MESSAGES[(4 * i // n) - 1])
            if rate > 0 and i % 500 == 0:
                ahead = sent / rate - (time.monotonic() - started)
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush()
    finally:
        producer.close()
    return sent


#: the model of the demo's end-of-stream ticks (their windows never close, so they are never shown)
TICK_MODEL = "demo-clock"


def produce_ticks(bootstrap: str, topic: str, at: float, partitions: int) -> int:
    """One event at event time ``at`` on every input partition, under its own key
    (``demo-clock|pN``), as a producer's heartbeat would: windows close by each partition's
    event-time watermark, so a stream that stops keeps its last window open until such an event
    moves the watermark past it."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1)
    try:
        for p in range(partitions):
            tick = {"ts": at, "model": TICK_MODEL, "segment": f"p{p}", "y_true": 0, "score": 0.5}
            producer.send(topic, partition=p, key=f"{TICK_MODEL}|p{p}".encode(),
                          value=json.dumps(tick, separators=(",", ":")).encode())
        producer.flush()
    finally:
        producer.close()
    return partitions


def _watch(bootstrap: str, topic: str, out: TextIO, stop: threading.Event, seen: list) -> None:
    """Print every snapshot published on ``topic`` until ``stop`` is set."""
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, group_id=None)
    tps = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or {0})]
    consumer.assign(tps)
    consumer.seek_to_beginning(*tps)
    try:
        while not stop.is_set():
            for records in consumer.poll(timeout_ms=200).values():
                for rec in records:
                    snap = json.loads(rec.value)
                    if snap.get("final"):
                        seen.append(snap)
                        print(format_row(snap), file=out, flush=True)
    finally:
        consumer.close()


def run_demo(args: Any, out: TextIO = sys.stdout) -> int:
    try:
        from consumers.broker import BrokerError, EmbeddedBroker, create_topics

        from .service import MetricsService, ServiceConfig
    except ImportError as exc:
        print(f"streammetrics demo needs the demo extra: pip install 'streammetrics[demo]' ({exc})", file=out)
        return 2

    broker = None
    dlq_topic = f"{args.topic}-dlq"
    try:
        if args.bootstrap_servers:
            bootstrap = args.bootstrap_servers
        else:
            print("starting a local Kafka-protocol broker (tansu, in memory) ...", file=out, flush=True)
            try:
                broker = EmbeddedBroker().start()
            except BrokerError as exc:  # e.g. only the kafka extra: no tansu binary
                print(f"streammetrics demo: {exc}; or run it against a Kafka broker with --bootstrap-servers "
                      "HOST:PORT", file=sys.stderr)
                return 2
            bootstrap = broker.bootstrap_servers
        try:
            create_topics(bootstrap, {args.topic: INPUT_PARTITIONS, args.output_topic: 1, dlq_topic: 1},
                          timeout=15 if args.bootstrap_servers else 30)
        except Exception as exc:  # kafka-python errors, BrokerError: the demo has nothing to run on
            if not type(exc).__module__.startswith(("kafka", "consumers")):
                raise
            print(f"streammetrics demo: cannot use the Kafka broker at {bootstrap}: {exc}", file=sys.stderr)
            return 1
        if args.produce_only:
            n = produce_events(bootstrap, args.topic, args.events, args.duration, args.rate)
            print(f"produced {n} events to {args.topic} on {bootstrap}", file=out)
            return 0

        with tempfile.TemporaryDirectory(prefix="streammetrics-demo-") as state_dir:
            config = ServiceConfig(bootstrap_servers=bootstrap, topic=args.topic, output_topic=args.output_topic,
                                   group_id="streammetrics-demo", dlq_topic=dlq_topic, state_dir=state_dir,
                                   window=args.window, idle_close=2.0)
            service = MetricsService(config)
            service_thread = threading.Thread(target=service.run, name="service", daemon=True)
            stop_watch = threading.Event()
            seen: list = []
            watcher = threading.Thread(target=_watch, args=(bootstrap, args.output_topic, out, stop_watch, seen),
                                       name="watch", daemon=True)
            service_thread.start()
            print(f"broker {bootstrap}: producing {args.events:,} predictions of 3 models over "
                  f"{args.duration / 60:g} min of event time at {args.rate:,.0f}/s; one line per closed "
                  f"{args.window:g}s window:\n", file=out, flush=True)
            print(HEADER, file=out, flush=True)
            watcher.start()
            try:
                sent = produce_events(bootstrap, args.topic, args.events, args.duration, args.rate)
                # the stream's end: a tick one window past it on every partition closes the last windows
                ticks = produce_ticks(bootstrap, args.topic, DEFAULT_START + args.duration + args.window,
                                      INPUT_PARTITIONS)
                # wait until the service has applied everything and closed the windows
                deadline = time.monotonic() + 60
                while time.monotonic() < deadline and not (
                        service.counts["events"] + service.counts["late"] >= sent + ticks
                        and service.caught_up()):
                    time.sleep(0.5)
                time.sleep(1.0)  # let the watcher print the last snapshots
            finally:
                service.stop()
                service_thread.join(timeout=30)
                stop_watch.set()
                watcher.join(timeout=10)
            c = service.counts
            print(f"\n{sent:,} events produced; {c['events'] - ticks:,} applied, "
                  f"{c['dead_letters']} dead letters (malformed or late) in {dlq_topic}, "
                  f"{len(seen)} window snapshots in {args.output_topic}.", file=out)
            path = report_path(args.report)
            if path:
                _write_report(seen, path, out)
        return 0
    finally:
        if broker is not None:
            broker.stop()


def report_path(option: str | None) -> str:
    """Where the demo writes its report: ``--report FILE`` ('' for none), by default
    ``streammetrics-demo-report.html`` in the system's temporary directory (not the current
    directory, which is often a checkout the file would litter)."""
    if option is None:
        return os.path.join(tempfile.gettempdir(), "streammetrics-demo-report.html")
    return option


def _write_report(snapshots: list, path: str, out: TextIO) -> None:
    """The HTML report of the demo's snapshots; without matplotlib, say how to get it."""
    try:
        from streammetrics.report import write_report

        # fraud-v2/web's ranking quality decays through the stream: the alert marks where
        write_report(snapshots, path, title="streammetrics demo", alerts=DEMO_ALERTS)
    except (ImportError, OSError, ValueError) as exc:  # no matplotlib (only the kafka extra), unwritable path
        print(f"(no report: {exc})", file=out)
        return
    print(f"report written to {os.path.abspath(path)}", file=out)
