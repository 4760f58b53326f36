"""``streammetrics consume`` on the command line: arguments -> :class:`ServiceConfig`, the real
Kafka clients, logging, signals, exit status."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from typing import Any

from streammetrics.events.parser import parse_field_map
from streammetrics.stream.replay import read_references

from .checkpoint import CheckpointStore
from .gc_tuning import tune_gc
from .logs import configure_logging
from .service import MetricsService, ServiceConfig

__all__ = ["config_from_args", "kafka_options", "run_consume"]

log = logging.getLogger("streammetrics.consume")


def kafka_options(pairs: list[str]) -> dict[str, Any]:
    """``--kafka name=value`` pairs as kafka-python keyword arguments (ints and booleans parsed).

    >>> kafka_options(["security_protocol=SSL", "linger_ms=20", "check_crcs=false"])
    {'security_protocol': 'SSL', 'linger_ms': 20, 'check_crcs': False}
    """
    options: dict[str, Any] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise ValueError(f"--kafka takes OPTION=VALUE (e.g. security_protocol=SSL), got {pair!r}")
        v: Any = value
        if value.lower() in ("true", "false"):
            v = value.lower() == "true"
        else:
            try:
                v = int(value)
            except ValueError:
                pass
        options[name.strip()] = v
    return options


def config_from_args(args: Any) -> ServiceConfig:
    """The :class:`ServiceConfig` of parsed ``consume`` arguments (ValueError for bad values)."""
    return ServiceConfig(
        bootstrap_servers=args.bootstrap_servers, topic=args.topic, output_topic=args.output_topic,
        group_id=args.group_id, dlq_topic=args.dlq_topic, state_dir=args.state_dir,
        metrics_port=args.metrics_port, metrics_host=args.metrics_host, task=args.task, window=args.window,
        slide=args.slide, grace=args.grace, idle_close=args.idle_close or None, threshold=args.threshold,
        classes=args.classes, labels=args.labels, fields=parse_field_map(args.field),
        cumulative=args.cumulative, include_state=not args.no_state,
        checkpoint_interval=args.checkpoint_interval, max_poll_records=args.max_poll_records,
        kafka_options=kafka_options(args.kafka),
        stop_timeout=getattr(args, "stop_timeout", ServiceConfig.stop_timeout),
        stall_after=getattr(args, "stall_after", ServiceConfig.stall_after),
        metrics_keys=getattr(args, "metrics_keys", ServiceConfig.metrics_keys),
        max_future=getattr(args, "max_future", ServiceConfig.max_future) or None,
        max_keys=getattr(args, "max_keys", ServiceConfig.max_keys) or None,
        references=read_references(args) if getattr(args, "reference", None) else None,
        max_references=getattr(args, "max_references", None) or ServiceConfig.max_references,
    )


def run_consume(args: Any) -> int:
    """Run the service until SIGTERM/SIGINT; the process exit status."""
    try:
        configure_logging(args.log_level)
    except ValueError as exc:
        print(f"streammetrics consume: {exc}", file=sys.stderr)
        return 2
    try:
        config = config_from_args(args)
        config.monitor_factory()  # configuration errors before any connection
        store = None
        if config.state_dir:
            try:
                store = CheckpointStore(config.state_dir, config.group_id, config.topic, config.window_settings())
            except OSError as exc:
                print(f"streammetrics consume: --state-dir {config.state_dir!r} cannot hold checkpoints: "
                      f"{exc.strerror or exc} (give a writable directory)", file=sys.stderr)
                return 2
        from .clients import kafka_clients

        consumer, producer = kafka_clients(config)
        service = MetricsService(config, consumer, producer, store=store)
    except ImportError as exc:
        print(f"streammetrics consume needs the kafka extra: pip install 'streammetrics[kafka]' ({exc})",
              file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"streammetrics consume: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # kafka.errors.KafkaError and friends: nothing to consume from
        if type(exc).__module__.startswith("kafka"):
            print(f"streammetrics consume: cannot connect to Kafka at {args.bootstrap_servers}: {exc}",
                  file=sys.stderr)
            return 1
        raise

    watchdog: list[threading.Timer] = []

    def on_signal(signum: int, frame: Any) -> None:
        log.info("signal %d: stopping (at most %g s)", signum, config.stop_timeout)
        service.stop()
        if not watchdog:  # whatever the loop is blocked in, the process ends within stop_timeout
            timer = threading.Timer(config.stop_timeout, _force_exit, args=(config.stop_timeout,))
            timer.daemon = True
            timer.start()
            watchdog.append(timer)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    tune_gc()
    status = service.run()
    for timer in watchdog:
        timer.cancel()
    return status


def _force_exit(stop_timeout: float) -> None:
    """The watchdog: a clean stop took longer than ``stop_timeout``. Exit with status 1 without
    a checkpoint; the last checkpoint stays valid, so a restart loses and repeats nothing."""
    log.error("did not stop within %g s of the signal (--stop-timeout): exiting with status 1; the last "
              "checkpoint stays valid", stop_timeout)
    logging.shutdown()
    os._exit(1)
