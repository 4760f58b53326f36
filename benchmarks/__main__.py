"""Run the benchmarks' targets in one process and print (or write) one table (issue 24, point 5).

    python -m benchmarks --quick            # every benchmark's smoke size: a table of targets
    python -m benchmarks --quick --check    # exit 1 where a ratio is grossly off (see below)
    python -m benchmarks --markdown docs/performance.md   # a full run, written as the docs' table
    python -m benchmarks --only bench_paths,bench_updates

Each benchmark module listed in :data:`BENCHMARKS` exposes ``targets(quick) -> list[Target]``
(:mod:`_targets`); its script keeps working on its own. The table has one row per target:
benchmark, target, the target ratio, the measured ratio, met/MISSED. ``--check`` fails only on a
*gross* miss: a ratio on the wrong side of a third of what it is checked against (its target, or,
for a target not yet reached, the level the issue recorded when it was set, given as ``known``),
so that a gross regression shows through the noise of a smoke-size run on a loaded machine while
targets still open do not fail every run. MISSED is printed against the target either way.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import io
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the benchmark scripts import their helpers as top-level modules
    sys.path.insert(0, str(HERE))

from _targets import Target  # noqa: E402  (after the path set-up)

#: benchmark modules with ``targets(quick)``, in the order they run
BENCHMARKS = ["bench_updates", "bench_paths", "bench_confusion", "bench_monitor", "bench_multiclass", "sim_intervals",
              "bench_alerts", "bench_slices", "bench_state"]
#: the other scripts of benchmarks/, and why the runner leaves them out
NOT_RUN = {
    "bench_inputs": "input formats against JSONL (no target)",
    "bench_auc_accuracy": "accuracy against exact AUC on river datasets (no speed target)",
    "bench_churn": "memory under key churn (no ratio target)",
    "bench_consumer": "needs the Kafka-protocol broker",
    "bench_kafka_baseline": "needs the Kafka-protocol broker",
    "bench_keys": "its 10,000-key target is measured by bench_paths",
    "bench_label_free": "needs nannyml and downloaded datasets",
    "bench_labels": "no ratio target",
    "bench_leave_stall": "needs the Kafka-protocol broker (a consumer group member leaving mid-rebalance)",
    "bench_multiclass_fused": "no ratio target",
    "bench_regression": "no ratio target",
    "bench_replay": "its decode-loop target is measured by bench_paths",
    "bench_replay_reference": "its --reference path is measured by bench_paths",
    "bench_report": "no ratio target",
    "bench_scaleout": "needs the Kafka-protocol broker",
    "bench_snapshot": "no ratio target",
    "bench_spark": "needs pyspark and a JVM",
}


def run(names: list[str], quick: bool, echo: bool = False) -> tuple[list[Target], list[str]]:
    """Every target of the named benchmarks; failures to run are returned as messages."""
    out: list[Target] = []
    errors: list[str] = []
    for name in names:
        t0 = time.perf_counter()
        try:
            module = importlib.import_module(name)
        except ImportError as exc:  # a peer it compares with (river, scikit-learn) is not installed
            errors.append(f"{name}: not run ({exc})")
            continue
        sink = io.StringIO()
        try:
            with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
                got = module.targets(quick)
            out.extend(got)
        except Exception as exc:  # noqa: BLE001 - one benchmark's failure is reported, the others run
            errors.append(f"{name}: FAILED ({type(exc).__name__}: {exc})")
        if echo:
            print(sink.getvalue(), end="")
        print(f"# {name}: {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    return out, errors


def table(targets: list[Target], markdown: bool = False) -> str:
    rows = [(t.benchmark, t.name, f"{'<=' if t.at_most else '>='} {t.target:g}", f"{t.measured:.3g}", t.status)
            for t in targets]
    head = ("benchmark", "target", "target ratio", "measured ratio", "met/MISSED")
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
        return "\n".join(lines) + "\n"
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return "\n".join(fmt.format(*r) for r in [head, *rows]) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="every benchmark's smoke size")
    ap.add_argument("--check", action="store_true", help="exit 1 where a ratio is grossly off (a third of its level)")
    ap.add_argument("--markdown", metavar="FILE", help="also write the table as markdown to FILE")
    ap.add_argument("--only", metavar="B1,B2", help="run only these benchmarks")
    ap.add_argument("--verbose", action="store_true", help="also print each benchmark's own output")
    args = ap.parse_args(argv)
    names = args.only.split(",") if args.only else BENCHMARKS
    unknown = [n for n in names if n not in BENCHMARKS]
    if unknown:
        ap.error(f"no targets() in {', '.join(unknown)}; known: {', '.join(BENCHMARKS)}")
    targets, errors = run(names, args.quick, args.verbose)
    print(table(targets), end="")
    for e in errors:
        print(e)
    if not args.only:
        print(f"not run: {', '.join(sorted(NOT_RUN))} (see benchmarks/__main__.py NOT_RUN)")
    size = "smoke sizes (--quick)" if args.quick else "full sizes"
    met = sum(t.met for t in targets)
    print(f"{met} met, {len(targets) - met} MISSED of {len(targets)} targets ({size})")
    if args.markdown:
        command = "python -m benchmarks" + (" --quick" if args.quick else "")
        text = (f"# Performance\n\nGenerated by `{command} --markdown {args.markdown}` "
                f"({time.strftime('%Y-%m-%d', time.gmtime())}, {size}); each benchmark's docstring says "
                "what it measures. Ratios are against the target's reference in the same run.\n\n"
                + table(targets, markdown=True))
        Path(args.markdown).write_text(text, encoding="utf-8")
    if args.check:
        bad = [t for t in targets if t.gross]
        for t in bad:
            print(f"GROSS: {t.benchmark} {t.name}: {t.measured:.3g} against {t.checked:g}")
        if bad or errors:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
