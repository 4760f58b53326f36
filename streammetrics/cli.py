"""The ``streammetrics`` command line: ``replay`` (files), ``consume`` (Kafka) and ``demo``.

``replay`` needs nothing but this package; ``consume`` and ``demo`` need the ``kafka`` /
``demo`` extras and are imported only when called.
"""
from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any

from streammetrics.stream.windows import parse_duration

__all__ = ["build_parser", "main"]

EXAMPLES_REPLAY = """\
examples:
  streammetrics replay predictions.jsonl --window 60s
  streammetrics replay predictions.jsonl --window 5m --slide 1m --grace 30s --output snapshots.jsonl
  cat events.jsonl | streammetrics replay - --task regression --field y_pred=prediction
  streammetrics replay events.jsonl --task multiclass --classes cat,dog,bird
  streammetrics replay --sample            # the small sample file shipped with streammetrics
  streammetrics replay predictions.csv --ts-unit ms            # CSV (or .parquet) with epoch milliseconds
  streammetrics replay predictions.jsonl --labels labels.jsonl --label-ttl 7d   # delayed ground truth
"""

EXAMPLES_REPORT = """\
examples:
  streammetrics replay predictions.jsonl -o snapshots.jsonl && streammetrics report snapshots.jsonl -o report.html
  streammetrics report kafka://localhost:9092/snapshots --alert 'roc_auc<0.85' --alert 'f1<0.6'
"""

EXAMPLES_CONSUME = """\
examples:
  streammetrics consume --bootstrap-servers localhost:9092 --topic predictions \\
      --output-topic snapshots --dlq-topic predictions-dlq --state-dir /var/lib/streammetrics
  streammetrics consume --bootstrap-servers broker:9093 --topic predictions --output-topic snapshots \\
      --kafka security_protocol=SASL_SSL --kafka sasl_mechanism=SCRAM-SHA-512 \\
      --kafka sasl_plain_username=svc --kafka sasl_plain_password=$PASSWORD
"""


def _duration(name: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            return parse_duration(text, name)
        except (TypeError, ValueError) as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    return parse


def _number(name: str, convert: Callable[[str], Any], ok: Callable[[Any], bool], what: str,
            unparsed: str | None = None) -> Callable[[str], Any]:
    """A flag's parser: ``convert(text)`` if ``ok`` of it, else "NAME must be WHAT" (``unparsed``
    where ``convert`` fails; WHAT when not given: a float's "nan" then fails ``ok``)."""
    def parse(text: str) -> Any:
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be {unparsed or what}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"{name} must be {what}, got {text!r}")
        return value

    return parse


def _positive_int(name: str) -> Callable[[str], int]:
    return _number(name, int, lambda v: v >= 0, "0 or more", "a whole number")


_labels_bound = _number("--max-labels", int, lambda v: v >= 2, "2 or more", "a whole number")


def _label_list(text: str) -> list:
    """``a,b,c`` -> labels; items that look like integers become ints."""
    out: list = []
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        try:
            out.append(int(item))
        except ValueError:
            out.append(item)
    if not out:
        raise argparse.ArgumentTypeError("expected a comma-separated list such as cat,dog,bird")
    return out


def _add_task_options(p: argparse.ArgumentParser, replay: bool = False) -> None:
    """The task and window flags of ``replay`` and ``consume``; ``--labels FILE`` is replay's only
    (consume keeps it hidden, to say that the service reads ``--labels-topic``)."""
    g = p.add_argument_group("task and windows")
    g.add_argument("--task", choices=["binary", "multiclass", "labels", "regression"], default="binary",
                   help="prediction task (default: binary)")
    g.add_argument("--window", type=_duration("--window"), default=60.0, metavar="DURATION",
                   help="window size, e.g. 60s, 5m (default: 60s)")
    g.add_argument("--slide", type=_duration("--slide"), default=None, metavar="DURATION",
                   help="hop between window starts (default: the window size: tumbling windows)")
    g.add_argument("--grace", type=_duration("--grace"), default=0.0, metavar="DURATION",
                   help="how late an event may arrive behind its key's newest event (default: 0s)")
    g.add_argument("--threshold", type=float, default=0.5,
                   help="binary task: score >= threshold is a positive prediction (default: 0.5)")
    g.add_argument("--classes", type=_label_list, default=None, metavar="A,B,C",
                   help="multiclass task: the classes, in the order of score arrays")
    g.add_argument("--labels", dest="labels_file", default=None, metavar="FILE",
                   help="a file of label events {id, y_true, ts} (delayed ground truth; JSONL, CSV or Parquet)"
                   if replay else argparse.SUPPRESS)
    g.add_argument("--label-set", dest="labels", type=_label_list, default=None, metavar="A,B,C",
                   help="labels task: fix the label set (default: discovered)")
    g.add_argument("--max-labels", type=_labels_bound, default=1000, metavar="N",
                   help="labels task with discovered labels: most labels a window keeps; the most frequent are "
                        "kept, the others folded into __other__ / __other_mismatch__ and counted in the "
                        "snapshot's labels_folded (default: 1000; see docs/limits-labels.md)")
    g.add_argument("--field", action="append", default=[], metavar="NAME=SOURCE",
                   help="read field NAME from the event key SOURCE, e.g. --field y_true=label (repeatable)")
    g.add_argument("--max-future", type=_duration("--max-future"), default=3600.0, metavar="DURATION",
                   help="refuse events whose time is more than this ahead of the wall clock "
                        "(default: 1h; 0 disables)")
    g.add_argument("--max-keys", type=_positive_int("--max-keys"), default=100_000, metavar="N",
                   help="most (model, segment) keys with open windows at once; events of further keys are "
                        "rejected and counted (default: 100000; 0: no bound)")
    g.add_argument("--max-snapshot-bytes", type=_positive_int("--max-snapshot-bytes"), default=None, metavar="N",
                   help="snapshots longer than this degrade (state dropped, flagged) instead of failing "
                        "(default: no bound)")
    g.add_argument("--cumulative", action="store_true",
                   help="also emit an all-time snapshot per key after each closed window (its events up to "
                        "that window's end)")
    g.add_argument("--no-state", action="store_true",
                   help="leave the accumulator state out of snapshots (smaller output)")
    g.add_argument("--reference", default=None, metavar="FILE",
                   help="JSONL of labelled events (or snapshots) of a trusted period, binary or multiclass: "
                        "snapshots of keys with a reference carry drift, calibration and estimated performance "
                        "(null for keys without one)")
    g.add_argument("--max-references", type=_positive_int("--max-references"), default=10_000, metavar="N",
                   help="most (model, segment) keys in the --reference file; more is an error (default: 10000)")
    g.add_argument("--confidence", type=_open_unit("--confidence"), default=0.95, metavar="C",
                   help="confidence of the intervals snapshots with labelled events carry (contract section 9; "
                        "default: 0.95)")
    g.add_argument("--compare", choices=["reference", "previous"], default=None,
                   help="snapshots carry changes against the key's reference (the default with --reference) or "
                        "its previous window, significant by Benjamini-Hochberg at --fdr over each poll")
    g.add_argument("--fdr", type=_open_unit("--fdr"), default=0.05, metavar="Q",
                   help="false discovery rate of the changes marked significant (default: 0.05)")


def _share(name: str) -> Callable[[str], float]:
    return _number(name, float, lambda v: 0.0 < v <= 1.0, "a number above 0 and at most 1")


def _open_unit(name: str) -> Callable[[str], float]:
    return _number(name, float, lambda v: 0.0 < v < 1.0, "a number strictly between 0 and 1")


def _add_alert_options(p: argparse.ArgumentParser, output: str) -> None:
    g = p.add_argument_group("alerts")
    g.add_argument("--alert", action="append", default=[], metavar="RULE",
                   help="alert rule EXPR OP BOUND, repeatable: 'roc_auc<0.8', 'drift_ks[cat]>0.2', "
                        "'roc_auc.high<0.8' (whole interval below), 'roc_auc.change<0' (significant drop), "
                        "'roc_auc.drop>0.05' (Page-Hinkley over the key's windows), 'roc_auc<band(3)' "
                        "(the reference's mean - 3 sd)")
    g.add_argument("--alerts", default=None, metavar="FILE",
                   help="JSON or YAML file of rules: a list, or {rules: [...], cooldown: 10m}")
    g.add_argument("--alert-cooldown", type=_duration("--alert-cooldown"), default=None, metavar="DURATION",
                   help="event time after an alert fires before the same rule and key may fire again (default: 0)")
    if output == "file":
        g.add_argument("--alerts-output", default=None, metavar="FILE",
                       help="write alert events (firing/resolved) as JSON lines to FILE")
    else:
        g.add_argument("--alerts-topic", default=None, metavar="TOPIC",
                       help="publish alert events (firing/resolved) to TOPIC, keyed rule|model|segment")


def _rate(name: str) -> Callable[[str], float]:
    return _number(name, float, lambda v: 0.0 <= v <= 1.0, "a number in [0, 1]")


def _cost(name: str) -> Callable[[str], float]:
    return _number(name, float, lambda v: 0.0 <= v < math.inf, "a finite number >= 0")


def _add_slice_options(p: argparse.ArgumentParser) -> None:
    """Slices, roll-ups, fairness and operating points (contract section 11; docs/slices.md)."""
    g = p.add_argument_group("operating points, fairness and slices (binary)")
    g.add_argument("--target-recall", type=_rate("--target-recall"), default=None, metavar="R",
                   help="snapshots carry precision_at_recall and threshold_at_recall: the best precision "
                        "with recall >= R")
    g.add_argument("--target-precision", type=_rate("--target-precision"), default=None, metavar="P",
                   help="snapshots carry recall_at_precision and threshold_at_precision")
    g.add_argument("--target-fpr", type=_rate("--target-fpr"), default=None, metavar="F",
                   help="snapshots carry tpr_at_fpr and threshold_at_fpr: the best TPR with FPR <= F")
    g.add_argument("--cost-fp", type=_cost("--cost-fp"), default=None, metavar="A",
                   help="with --cost-fn: snapshots carry expected_cost = (A*FP + B*FN) / events at --threshold "
                        "(and estimated_expected_cost with --reference)")
    g.add_argument("--cost-fn", type=_cost("--cost-fn"), default=None, metavar="B",
                   help="the cost of a false negative (see --cost-fp)")
    g.add_argument("--slice-by", default=None, metavar="F1,F2",
                   help="event fields that join model and segment in the key (snapshot keys name every dimension)")
    g.add_argument("--max-slice-values", type=_positive_int("--max-slice-values"), default=None, metavar="N",
                   help="values per slice dimension with their own slice in each window: the most frequent "
                        "in that window; the others' slices merge into __other__ (default: 100)")
    g.add_argument("--rollup", action="append", default=[], metavar="D1,D2",
                   help="per closed window, also a snapshot merged over the other dimensions, keyed by model and "
                        "D1,D2 ('model': the whole model; repeatable)")
    g.add_argument("--worst-metric", default=None, metavar="NAME",
                   help="roll-up windows rank their slices by their gap to the roll-up on this metric "
                        "(default: roc_auc)")
    g.add_argument("--worst-slices", type=_positive_int("--worst-slices"), default=None, metavar="N",
                   help="slices listed per roll-up window, worst first (default: 10; 0: none)")
    g.add_argument("--fairness-by", default=None, metavar="D",
                   help="roll-up windows carry demographic parity and equalized odds across D's values "
                        "(fairlearn's definitions); implies --rollup model without --rollup")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="streammetrics",
        description="Windowed model-quality metrics over streams of prediction events.",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    p = sub.add_parser(
        "replay", help="replay a JSONL, CSV or Parquet file of prediction events into windowed snapshots (no broker)",
        description="Read prediction events (JSONL: one JSON object, or an array of them, per line; CSV: a "
                    "header naming the fields, cells typed by the task; Parquet: one row per event) and "
                    "write one snapshot per closed window as JSON lines. Rejected lines are reported on stderr.",
        epilog=EXAMPLES_REPLAY, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("file", nargs="?", help="events: JSONL, CSV or Parquet file (by extension or --format), "
                                           "'-' for standard input")
    p.add_argument("--format", choices=["jsonl", "csv", "parquet"], default=None,
                   help="input format (default: by the file's extension: .csv, .parquet/.pq, else JSONL); "
                        "applies to --labels FILE too unless its extension says otherwise. Parquet needs "
                        "pip install 'streammetrics[parquet]'")
    p.add_argument("--ts-unit", choices=["s", "ms", "us", "ns"], default="s",
                   help="unit of numeric ts (default: s; pandas' to_json writes ms); ISO-8601 strings and "
                        "timestamp columns are read as they are")
    p.add_argument("--sample", action="store_true", help="replay the sample file shipped with streammetrics")
    p.add_argument("--output", "-o", default="-", metavar="FILE", help="snapshots JSONL (default: stdout)")
    p.add_argument("--quiet", "-q", action="store_true", help="do not list rejected lines on stderr")
    p.add_argument("--progress", choices=["auto", "on", "off"], default="auto",
                   help="progress bar on stderr (auto: only on a terminal)")
    p.add_argument("--idle-close", type=_duration("--idle-close"), default=None, metavar="DURATION",
                   help="no effect, kept for old scripts: windows close by the stream's watermark whatever "
                        "the key, so a quiet key closes (and is forgotten) with the others")
    p.add_argument("--label-ttl", type=_duration("--label-ttl"), default=7 * 86400.0, metavar="DURATION",
                   help="how long (event time) a prediction waits for its label, and a label for its "
                        "prediction, before expiring (default: 7d)")
    p.add_argument("--max-pending", type=int, default=None, metavar="N",
                   help="bound on predictions awaiting labels; beyond it the oldest expire early "
                        "(default: 50,000,000)")
    _add_task_options(p, replay=True)
    _add_alert_options(p, "file")
    _add_slice_options(p)

    c = sub.add_parser(
        "consume", help="the Kafka service: prediction events in, snapshots out",
        description="Consume prediction events from a Kafka topic in a consumer group, publish one snapshot "
                    "per closed window to the output topic, route bad and late messages to the dead-letter "
                    "topic. SIGTERM/SIGINT stop it cleanly.",
        epilog=EXAMPLES_CONSUME, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    _add_consume_options(c)
    _add_task_options(c)
    _add_slice_options(c)
    _add_alert_options(c, "topic")

    r = sub.add_parser(
        "report", help="an HTML report of snapshots: metrics over time, curves, confusion matrix, alerts",
        description="Build one self-contained HTML file (charts inlined, no network access) from snapshots: a "
                    "JSONL file written by `replay`, or a snapshot topic read to its end.",
        epilog=EXAMPLES_REPORT, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("source", help="snapshots JSONL file ('-' for stdin) or kafka://HOST:PORT/TOPIC")
    r.add_argument("--output", "-o", default="report.html", metavar="FILE", help="HTML file (default: report.html)")
    r.add_argument("--alert", action="append", default=[], metavar="RULE",
                   help="mark windows where a metric crosses a bound, e.g. 'roc_auc<0.8' or 'log_loss>0.5' "
                        "(repeatable)")
    r.add_argument("--alerts", default=None, metavar="FILE",
                   help="JSON or YAML file of alert rules (as replay's --alerts)")
    r.add_argument("--title", default=None, help="report title")
    r.add_argument("--max-charts", type=int, default=None, metavar="N",
                   help="draw at most N charts (default 120): all keys if they fit, else those with alerts, the "
                        "worst by headline metric and the largest, in turn; every key stays in the summary table")

    a = sub.add_parser(
        "alert-rules", help="Prometheus alerting rules (YAML) for streammetrics alert rules",
        description="Write a Prometheus rule file with one alerting rule per streammetrics rule: metric rules "
                    "compare the service's streammetrics_window_metric gauges; rules only the service can "
                    "evaluate (.change, .drop, .rise, band(K)) read streammetrics_alert_firing.",
    )
    a.add_argument("--alert", action="append", default=[], metavar="RULE", help="a rule (repeatable)")
    a.add_argument("--alerts", default=None, metavar="FILE", help="JSON or YAML file of rules")
    a.add_argument("--group", default="streammetrics", help="rule group name (default: streammetrics)")
    a.add_argument("--for", dest="for_", default="0m", metavar="DURATION",
                   help="Prometheus 'for' clause of every rule (default: 0m)")
    a.add_argument("--output", "-o", default="-", metavar="FILE", help="rule file (default: stdout)")

    d = sub.add_parser(
        "demo", help="run everything locally: a broker, a drifting model's predictions, the service, live metrics",
        description="Start a local Kafka-protocol broker (unless --bootstrap-servers is given), stream synthetic "
                    "predictions from a model that drifts, run the service and show each window's metrics.",
    )
    _add_demo_options(d)
    return parser


def _add_consume_options(c: argparse.ArgumentParser) -> None:
    g = c.add_argument_group("kafka")
    g.add_argument("--bootstrap-servers", required=True, metavar="HOST:PORT[,HOST:PORT]")
    g.add_argument("--topic", required=True, help="input topic of prediction events")
    g.add_argument("--output-topic", required=True, help="topic for snapshots (key model|segment|window_start)")
    g.add_argument("--group-id", default="streammetrics", help="consumer group (default: streammetrics)")
    g.add_argument("--dlq-topic", default=None, help="dead-letter topic for bad and late messages")
    g.add_argument("--state-dir", default=None, metavar="DIR",
                   help="local cache of the checkpoints (window state and input offsets); optional with the "
                        "changelog topic, which holds them in Kafka")
    g.add_argument("--metrics-port", type=int, default=None, metavar="PORT",
                   help="serve Prometheus /metrics and /healthz on this port")
    g.add_argument("--idle-close", type=_duration("--idle-close"), default=30.0, metavar="DURATION",
                   help="an input partition that receives nothing for this long (wall time) adopts the "
                        "watermark of the slowest partition still receiving, so its windows close too "
                        "(default: 30s; 0 disables). Never closes a window by wall time alone")
    g.add_argument("--checkpoint-interval", type=_duration("--checkpoint-interval"), default=1.0,
                   metavar="DURATION", help="how often state is checkpointed and offsets committed (default: 1s)")
    g.add_argument("--checkpoint-max-share", type=_share("--checkpoint-max-share"), default=0.25, metavar="FRACTION",
                   help="most of the wall time checkpoints may take: after one that took d seconds the next "
                        "comes no sooner than d*(1/FRACTION-1) seconds, even if --checkpoint-interval is "
                        "shorter (default: 0.25; 1: every interval whatever they cost)")
    g.add_argument("--checkpoint-refresh", type=_duration("--checkpoint-refresh"), default=3600.0,
                   metavar="DURATION", help="a partition with no new input still re-writes its checkpoint this "
                        "often, so a changelog retention.ms above it never removes the last one (default: 1h)")
    g.add_argument("--max-poll-records", type=int, default=5000, metavar="N",
                   help="most records applied per poll (default: 5000)")
    g.add_argument("--metrics-host", default="0.0.0.0",
                   help="address for --metrics-port (default: 0.0.0.0, every interface, as exporters do; "
                        "127.0.0.1 keeps it local)")
    g.add_argument("--metrics-keys", type=int, default=100, metavar="N",
                   help="per-key Prometheus gauges for at most N keys, those with the most events (default: 100; "
                        "0: none)")
    g.add_argument("--stall-after", type=_duration("--stall-after"), default=60.0, metavar="DURATION",
                   help="/healthz answers 503 when the loop has not polled for this long (default: 60s)")
    g.add_argument("--stop-timeout", type=_duration("--stop-timeout"), default=30.0, metavar="DURATION",
                   help="exit at most this long after SIGTERM/SIGINT, whatever the broker does (default: 30s)")
    g.add_argument("--rejoin-after", type=_duration("--rejoin-after"), default=30.0, metavar="DURATION",
                   help="a member of the input or merge consumer group rebalancing this long leaves and joins again "
                        "with a new consumer (docs/scaleout.md, Liveness; default: 30s; 0: never)")
    g.add_argument("--changelog-topic", default=None, metavar="TOPIC",
                   help="topic holding every partition's checkpoints (window state, pending labels, offsets), "
                        "restored on assignment when --state-dir has none or an older one; created with the "
                        "input's partition count if missing (default: GROUP-TOPIC-changelog; '' for none)")
    g.add_argument("--internal-key", default=None, metavar="FILE",
                   help="HMAC-SHA256 key (file) sealing the changelog and partials records; unsigned or forged "
                        "ones are skipped and counted (default: $STREAMMETRICS_INTERNAL_KEY, else unsigned)")
    g.add_argument("--labels-topic", default=None, metavar="TOPIC",
                   help="topic of label events {id, y_true, ts}, co-partitioned with --topic by id (same "
                        "partition count, message key = id); merged with the predictions by ts")
    g.add_argument("--label-ttl", type=_duration("--label-ttl"), default=7 * 86400.0, metavar="DURATION",
                   help="how long (event time) a prediction waits for its label, and a label for its "
                        "prediction, before expiring (default: 7d)")
    g.add_argument("--max-pending", type=int, default=None, metavar="N",
                   help="bound on predictions awaiting labels per partition; beyond it the oldest expire "
                        "early (default: 50,000,000)")
    g.add_argument("--max-merge-buffer", type=int, default=20_000, metavar="N",
                   help="with --labels-topic: records held per partition and topic awaiting the other topic's "
                        "records to merge with; beyond it that partition is paused (default: 20000)")
    g.add_argument("--partitioning", choices=("key", "any", "key-unchecked"), default="key",
                   help="key: each model|segment lives in one input partition: produce with that message key "
                        "(checked: a record of a topic of several partitions keyed otherwise, e.g. by prediction "
                        "id, stops the service with status 2 before anything is published); any: events of a "
                        "key may be on every partition, partial windows are merged exactly through the internal "
                        "partials topic; key-unchecked: as key, for producers whose own partitioner keeps each "
                        "model|segment in one partition whatever the message key (default: key)")
    g.add_argument("--partials-topic", default=None, metavar="TOPIC",
                   help="with --partitioning any: internal topic of partial windows and watermarks "
                        "(default: GROUP-TOPIC-partials)")
    g.add_argument("--max-merge-windows", type=int, default=100_000, metavar="N",
                   help="with --partitioning any: windows the merge holds per partials partition; beyond it "
                        "the oldest is published incomplete (default: 100000)")
    g.add_argument("--kafka", action="append", default=[], metavar="OPTION=VALUE",
                   help="extra kafka-python client option, e.g. security_protocol=SSL (repeatable)")
    g.add_argument("--log-level", default="WARNING", help="logging level (default: WARNING)")


def _add_demo_options(d: argparse.ArgumentParser) -> None:
    d.add_argument("--bootstrap-servers", default=None, help="use this broker instead of starting one")
    d.add_argument("--events", type=int, default=60_000, help="events to produce (default: 60000)")
    d.add_argument("--duration", type=_duration("--duration"), default=600.0,
                   help="event-time span of the synthetic stream (default: 10m)")
    d.add_argument("--rate", type=float, default=5_000.0, help="events per second of wall time (default: 5000)")
    d.add_argument("--window", type=_duration("--window"), default=60.0, help="window size (default: 60s)")
    d.add_argument("--produce-only", action="store_true", help="only produce the synthetic events, then exit")
    d.add_argument("--topic", default="predictions")
    d.add_argument("--output-topic", default="snapshots")
    d.add_argument("--report", default=None, metavar="FILE",
                   help="HTML report written at the end (default: streammetrics-demo-report.html in the system's "
                        "temporary directory, not the current one; '' for none)")


def _version() -> str:
    from streammetrics import __version__

    return f"streammetrics {__version__}"


def _alert_rules(args: argparse.Namespace) -> int:
    from streammetrics.integrations.alertmanager import prometheus_rules
    from streammetrics.stream.alerting import load_rules_file, parse_rules

    try:
        texts = list(args.alert) + (load_rules_file(args.alerts)[0] if args.alerts else [])
        if not texts:
            raise ValueError("give rules with --alert RULE or --alerts FILE")
        if not re.fullmatch(r"\d+[smhd]", args.for_):
            raise ValueError(f"--for must be a Prometheus duration such as 5m, got {args.for_!r}")
        text = prometheus_rules(parse_rules(texts), group=args.group, for_=args.for_)
    except ValueError as exc:
        print(f"streammetrics alert-rules: {exc}", file=sys.stderr)
        return 2
    if args.output == "-":
        sys.stdout.write(text)
    else:
        with open(args.output, "w", encoding="utf-8") as fh:
            fh.write(text)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    labels_file = getattr(args, "labels_file", None)
    if labels_file is not None:
        if args.command != "replay":
            parser.error("--labels FILE (label events) is a replay option; the service reads --labels-topic")
        if not os.path.exists(labels_file) and "," in labels_file:
            parser.error(f"--labels takes a file of label events, and {labels_file!r} is none; "
                         "for the labels task's label set use --label-set A,B,C")
    try:
        if args.command == "replay":
            from streammetrics.stream.replay import run_replay

            return run_replay(args, parser)
        if args.command == "consume":
            from consumers.command import run_consume

            return run_consume(args)
        if args.command == "report":
            from streammetrics.report import run_report

            return run_report(args)
        if args.command == "alert-rules":
            return _alert_rules(args)
        if args.command == "demo":
            from consumers.demo import run_demo

            return run_demo(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # e.g. `streammetrics replay ... | head`
        try:
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - replaces stdout until exit
        except OSError:
            pass
        return 0
    parser.error(f"unknown command {args.command!r}")
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
