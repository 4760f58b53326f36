"""``streammetrics consume`` on the command line: arguments -> :class:`ServiceConfig`, the real
Kafka clients, logging, signals, exit status."""
from __future__ import annotations

import logging
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

from streammetrics.events.parser import parse_field_map
from streammetrics.stream.replay import read_references
from streammetrics.stream.slicing import sliced_snapshot_key
from streammetrics.stream.snapshots import snapshot_key

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
    config = ServiceConfig(
        **_section11(args),
        bootstrap_servers=args.bootstrap_servers, topic=args.topic, output_topic=args.output_topic,
        group_id=args.group_id, dlq_topic=args.dlq_topic, state_dir=args.state_dir,
        metrics_port=args.metrics_port, metrics_host=args.metrics_host, task=args.task, window=args.window,
        slide=args.slide, grace=args.grace, idle_close=args.idle_close or None, threshold=args.threshold,
        confidence=getattr(args, "confidence", ServiceConfig.confidence),
        compare=getattr(args, "compare", None), fdr=getattr(args, "fdr", ServiceConfig.fdr),
        classes=args.classes, labels=args.labels, fields=parse_field_map(args.field),
        max_labels=getattr(args, "max_labels", ServiceConfig.max_labels),
        cumulative=args.cumulative, include_state=not args.no_state,
        checkpoint_interval=args.checkpoint_interval, max_poll_records=args.max_poll_records,
        checkpoint_share=getattr(args, "checkpoint_max_share", None) or ServiceConfig.checkpoint_share,
        kafka_options=kafka_options(args.kafka),
        stop_timeout=getattr(args, "stop_timeout", ServiceConfig.stop_timeout),
        rejoin_after=getattr(args, "rejoin_after", ServiceConfig.rejoin_after) or None,
        stall_after=getattr(args, "stall_after", ServiceConfig.stall_after),
        metrics_keys=getattr(args, "metrics_keys", ServiceConfig.metrics_keys),
        max_future=getattr(args, "max_future", ServiceConfig.max_future) or None,
        max_keys=getattr(args, "max_keys", ServiceConfig.max_keys) or None,
        max_snapshot_bytes=getattr(args, "max_snapshot_bytes", None),
        references=read_references(args) if getattr(args, "reference", None) else None,
        max_references=getattr(args, "max_references", None) or ServiceConfig.max_references,
        labels_topic=getattr(args, "labels_topic", None),
        label_ttl=getattr(args, "label_ttl", ServiceConfig.label_ttl),
        max_pending_labels=getattr(args, "max_pending", None) or ServiceConfig.max_pending_labels,
        max_merge_buffer=getattr(args, "max_merge_buffer", None) or ServiceConfig.max_merge_buffer,
        changelog_topic=_changelog_topic(args),
        internal_key=getattr(args, "internal_key", None),
        checkpoint_refresh=getattr(args, "checkpoint_refresh", ServiceConfig.checkpoint_refresh),
        partitioning="key" if getattr(args, "partitioning", None) == "key-unchecked" else (
            getattr(args, "partitioning", None) or "key"),
        key_check=getattr(args, "partitioning", None) != "key-unchecked",
        partials_topic=getattr(args, "partials_topic", None) or None,
        max_merge_windows=getattr(args, "max_merge_windows", None) or ServiceConfig.max_merge_windows,
        alerts_topic=getattr(args, "alerts_topic", None) or None,
    )
    config.alerts = _alerts(args, config)
    return config


def _section11(args: Any) -> dict[str, Any]:
    """The operating points of ``--target-recall`` ... ``--cost-fn`` and the slices and roll-ups
    of ``--slice-by``, ``--rollup``, ``--fairness-by`` (contract section 11; ValueError naming
    the flag when they do not fit together)."""
    from streammetrics.stream.slicing import slice_settings

    return slice_settings(args)


def _alerts(args: Any, config: ServiceConfig) -> Any:
    """The AlertSpec of --alert/--alerts/--alert-cooldown (None without rules); the rules are checked
    against the task's metrics, and band(K) and sequential rules read --reference, as replay does."""
    from streammetrics.stream.alerting import spec_from_options

    rules, path = getattr(args, "alert", None) or [], getattr(args, "alerts", None)
    if not rules and not path:
        if config.alerts_topic:
            raise ValueError("--alerts-topic needs rules (--alert or --alerts)")
        return None
    return spec_from_options(rules, path, getattr(args, "alert_cooldown", None), getattr(args, "reference", None),
                             config.pipeline_config())


def _changelog_topic(args: Any) -> str | None:
    """``--changelog-topic``: None (flag absent) gives ``<group>-<topic>-changelog``; '' none."""
    from .changelog import default_changelog_topic

    name = getattr(args, "changelog_topic", None)
    if name is None:
        return default_changelog_topic(args.group_id, args.topic)
    return name or None


def ensure_changelog_topic(config: ServiceConfig, consumer: Any) -> None:
    """Create the changelog topic with the input topic's partition count if it does not exist
    (with ``--kafka`` TLS/SASL options; where clients may not create topics, create it beforehand)."""
    if not config.changelog_topic:
        return
    from .broker import create_topics
    from .service import security_options

    partitions = consumer.partitions_for_topic(config.topic)
    if not partitions:
        raise ValueError(f"input topic {config.topic!r} not found: create it before the changelog topic")
    created = create_topics(config.bootstrap_servers, {config.changelog_topic: len(partitions)}, exist_ok=True,
                            **security_options(config.kafka_options))
    have = created.get(config.changelog_topic)
    if have is not None and have < len(partitions):
        raise ValueError(f"changelog topic {config.changelog_topic!r} has {have} partitions, fewer than the "
                         f"{len(partitions)} of {config.topic!r}: give another --changelog-topic")


def merge_changelog_topic(config: ServiceConfig) -> str | None:
    """The merge stage's changelog (``<changelog-topic>`` with ``-merge`` before ``-changelog``, or
    ``<changelog-topic>-merge``); None when checkpoints are not kept in Kafka."""
    name = config.changelog_topic
    if not name:
        return None
    return name[:-len("-changelog")] + "-merge-changelog" if name.endswith("-changelog") else name + "-merge"


def merger_factory(config: ServiceConfig, sources: int) -> Callable[[], Any]:
    """The merge stage's :class:`~consumers.partials.Merger` of one partials partition, for
    ``sources`` input partitions (with slices: a :class:`~streammetrics.stream.slicing.Slicer`
    applies the budget and rolls up each merged window)."""
    from .partials import Merger

    pipeline_config = config.pipeline_config()
    extra, loader = pipeline_config.extra_metrics(), pipeline_config.monitor_loader()
    template = pipeline_config.monitor_factory()()  # a partial's state must be of this type and config

    def make_merger() -> Merger:
        slicer = None
        if config.slicing is not None:
            from streammetrics.stream.slicing import Slicer

            slicer = Slicer(config.slicing, include_state=config.include_state, extra_metrics=extra)
        return Merger(sources, include_state=config.include_state, extra_metrics=extra,
                      max_windows=config.max_merge_windows, loader=loader, template=template,
                      alerts=config.alerts, slicer=slicer, changes=pipeline_config.changes())

    return make_merger


def build_merge_stage(config: ServiceConfig, consumer: Any, service: MetricsService) -> Any:
    """``--partitioning any`` or slices: create the partials topic (and the merge changelog) with
    the input's partition count if missing, and the merge stage with its own consumer (group
    ``<group>-merge``) and producer; with slices, its mergers apply the budget and roll up
    (:class:`streammetrics.stream.slicing.Slicer`)."""
    from kafka import KafkaConsumer, KafkaProducer

    from .broker import create_topics
    from .changelog import Changelog, KafkaChangelogReader
    from .clients import producer_settings, split_client_options
    from .partials import MergeStage
    from .service import security_options
    from .settings import consumer_settings

    assert config.partials_topic
    output_key = snapshot_key if config.slicing is None else sliced_snapshot_key
    sources = len(consumer.partitions_for_topic(config.topic) or ())
    if not sources:
        raise ValueError(f"input topic {config.topic!r} not found: create it first")
    merge_log = merge_changelog_topic(config)
    wanted = {config.partials_topic: sources, **({merge_log: sources} if merge_log else {})}
    created = create_topics(config.bootstrap_servers, wanted, exist_ok=True, **security_options(config.kafka_options))
    for name, want in wanted.items():
        have = created.get(name)
        if have is not None and have < want and name != config.partials_topic:
            raise ValueError(f"topic {name!r} has {have} partitions, fewer than the {want} of {config.topic!r}")
    consumer_options, producer_options = split_client_options(config.kafka_options)
    # the merge group reads one topic, so nothing needs the range assignor's co-partitioning there: the
    # cooperative-sticky assignor moves only the partitions that change owner when an instance joins
    # or leaves, and the others keep merging through the rebalance (kafka-python >= 2.1)
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor

    consumer_options["partition_assignment_strategy"] = (CooperativeStickyAssignor,)
    def make_consumer() -> Any:
        return KafkaConsumer(bootstrap_servers=config.bootstrap_servers, group_id=f"{config.group_id}-merge",
                             **consumer_settings(**consumer_options))

    merge_consumer = make_consumer()
    producer = KafkaProducer(bootstrap_servers=config.bootstrap_servers,
                             **producer_settings(config, **producer_options))
    codec = CheckpointStore(config.state_dir, f"{config.group_id}-merge", config.partials_topic,
                            {"merge_of": config.window_settings(), "sources": sources})
    changelog = None
    if merge_log:
        reader = KafkaChangelogReader(merge_log, bootstrap_servers=config.bootstrap_servers,
                                      **security_options(config.kafka_options))
        changelog = Changelog(producer, merge_log, reader, service.max_record_bytes)
    return MergeStage(consumer=merge_consumer, producer=producer, partials_topic=config.partials_topic,
                      output_topic=config.output_topic, sources=sources, codec=codec,
                      make_merger=merger_factory(config, sources),
                      store=codec if config.state_dir else None, changelog=changelog,
                      checkpoint_interval=config.checkpoint_interval, delivery_timeout=config.delivery_timeout,
                      commit_timeout=config.commit_timeout,
                      encode=lambda snap: service.snapshot_value(snap, output_key(snap)), metrics=service.metrics,
                      signer=service.signer, alerts_topic=config.alerts_topic, key_of=output_key,
                      rejoin_after=config.rejoin_after, leave_wait=config.leave_wait, consumer_factory=make_consumer)


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
        from .signing import RecordSigner

        RecordSigner.from_option(config.internal_key)  # an unreadable or empty key: exit 2 before connecting
        store = None
        if config.state_dir:
            try:
                store = CheckpointStore(config.state_dir, config.group_id, config.topic, config.window_settings())
            except OSError as exc:
                print(f"streammetrics consume: --state-dir {config.state_dir!r} cannot hold checkpoints: "
                      f"{exc.strerror or exc} (give a writable directory)", file=sys.stderr)
                return 2
        from .clients import kafka_clients, kafka_consumer

        consumer, producer = kafka_clients(config)
        try:
            ensure_changelog_topic(config, consumer)
        except BaseException:
            consumer.close(autocommit=False, timeout_ms=1000)
            producer.close(timeout=1)
            raise
        service = MetricsService(config, consumer, producer, store=store,
                                 consumer_factory=lambda: kafka_consumer(config))
        if config.merged:
            try:
                service.merge = build_merge_stage(config, consumer, service)
            except BaseException:
                service.close()
                raise
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
