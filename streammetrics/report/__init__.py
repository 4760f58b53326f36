"""``streammetrics report``: one self-contained HTML page of metric snapshots.

Snapshots (contract section 3) come from a JSONL file written by ``replay``, standard input or
a Kafka snapshot topic (``kafka://HOST:PORT/TOPIC``, read to its end). What the page shows, which
keys get charts within ``max_charts`` and how delayed labels are drawn: ``docs/guide/report.md``.
Bad input never stops a report: malformed snapshots are skipped and counted, user text is
escaped in the HTML and kept literal in charts, and a state that cannot be rebuilt or a chart
that cannot be drawn becomes a note on its key.

Modules: :mod:`.sources` (reading), :mod:`.alerts` (rules), :mod:`.history` (per-key series,
monitors), :mod:`.select` (which keys get charts), :mod:`.charts` (matplotlib), :mod:`.page` (HTML).
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import IO, Any, Iterable, Sequence

from streammetrics.core.files import write_atomically
from streammetrics.report.alerts import (
    AlertRule,
    check_metrics,
    evaluate,
    known_metrics,
    load_rules_file,
    parse_rule,
    parse_rules,
)
from streammetrics.report.history import TASK_TITLES, KeyHistory, group_by_key
from streammetrics.report.select import DEFAULT_MAX_CHARTS, choose_charted
from streammetrics.report.sources import (
    LoadResult,
    SourceError,
    WindowSnapshot,
    from_dicts,
    read_source,
)

__all__ = [
    "write_report", "build_report", "run_report", "read_source", "parse_rule", "AlertRule", "ReportResult",
    "MissingDependency", "SourceError", "INSTALL_HINT", "DEFAULT_MAX_CHARTS",
]

INSTALL_HINT = "pip install 'streammetrics[report]'"
DEFAULT_TITLE = "streammetrics report"


class MissingDependency(ImportError):
    """matplotlib (the ``report`` extra) is not installed."""


@dataclass(frozen=True)
class ReportResult:
    """What a written report holds."""

    path: str
    keys: int
    windows: int
    alerts: int
    skipped: int
    charts: int
    charted: int = 0


def require_matplotlib() -> None:
    """``MissingDependency`` with the install command when matplotlib cannot be imported."""
    try:
        importlib.import_module("matplotlib")
    except ImportError as exc:
        raise MissingDependency(f"streammetrics report needs matplotlib ({exc}); install it with: {INSTALL_HINT}") \
            from None


def _rules(alerts: Iterable[str | AlertRule]) -> list[AlertRule]:
    rules: dict[str, AlertRule] = {}
    for rule in alerts:
        parsed = rule if isinstance(rule, AlertRule) else parse_rule(rule)
        rules.setdefault(parsed.text, parsed)
    return list(rules.values())


def _unique_anchors(histories: Sequence[KeyHistory]) -> list[str]:
    anchors: list[str] = []
    for h in histories:
        anchor, n = f"key-{h.slug}", 2
        while anchor in anchors:
            anchor, n = f"key-{h.slug}-{n}", n + 1
        anchors.append(anchor)
    return anchors


def build_report(loaded: LoadResult | Sequence[WindowSnapshot], *, alerts: Iterable[str | AlertRule] = (),
                 title: str | None = None, source: str | None = None,
                 max_charts: int = DEFAULT_MAX_CHARTS) -> tuple[str, ReportResult]:
    """The report's HTML and a summary (``path`` empty). ``ValueError`` for an empty input,
    a malformed rule, a rule on a metric no snapshot has or a negative ``max_charts``;
    ``MissingDependency`` without matplotlib. At most ``max_charts`` charts are drawn (see
    :mod:`.select` for which keys get them)."""
    require_matplotlib()
    from streammetrics import __version__
    from streammetrics.report.charts import charts_for, max_charts_of
    from streammetrics.report.page import render_page

    if not isinstance(loaded, LoadResult):
        loaded = LoadResult(snapshots=list(loaded))
    rules = _rules(alerts)
    order = {task: i for i, task in enumerate(TASK_TITLES)}
    histories = sorted(group_by_key(loaded.snapshots), key=lambda h: order.get(h.task, len(order)))  # stable
    if not histories:
        raise ValueError("no snapshots to report on")
    all_windows = [w for h in histories for w in h.windows]
    check_metrics(rules, known_metrics(all_windows))
    for h in histories:
        h.alerts = evaluate(rules, h.windows)
    selection = choose_charted(histories, max_charts, max_charts_of)
    sections = []
    for h, anchor in zip(histories, _unique_anchors(histories)):
        if selection.charted(h):
            sections.append((h, anchor, charts_for(h, anchor)))
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = render_page(title or DEFAULT_TITLE, histories, sections, rules, source=source, loaded=loaded,
                       generated=generated, version=__version__, selection=selection)
    result = ReportResult(path="", keys=len(histories), windows=len(all_windows),
                          alerts=sum(len(h.alerts) for h in histories), skipped=loaded.skipped,
                          charts=sum(len(c) for _, _, c in sections), charted=len(sections))
    return page, result


def write_report(snapshots: Iterable[dict[str, Any]] | LoadResult, path: str, *,
                 alerts: Iterable[str | AlertRule] = (), title: str | None = None,
                 source: str | None = None, max_charts: int = DEFAULT_MAX_CHARTS) -> ReportResult:
    """Write the HTML report of ``snapshots`` (decoded snapshot dicts, malformed ones skipped) to ``path``.

    ``alerts`` are rules such as ``"roc_auc<0.8"``. Raises ``ValueError`` (no usable snapshot, bad
    rule), ``MissingDependency`` (no matplotlib) or ``OSError`` (path not writable)."""
    loaded = snapshots if isinstance(snapshots, LoadResult) else from_dicts(snapshots)
    page, result = build_report(loaded, alerts=alerts, title=title, source=source, max_charts=max_charts)
    umask = os.umask(0)
    os.umask(umask)
    # "replace": a lone surrogate in a name (JSON allows "\ud800") cannot be encoded as UTF-8
    write_atomically(path, page.encode("utf-8", "replace"), mode=0o666 & ~umask)  # an ordinary file, not 0600
    return ReportResult(**{**result.__dict__, "path": path})


def _warn_skipped(loaded: LoadResult, source: str, err: IO[str]) -> None:
    if not loaded.skipped:
        return
    print(f"streammetrics report: warning: skipped {loaded.skipped} malformed snapshot"
          f"{'s' if loaded.skipped != 1 else ''} in {source} ({loaded.reasons_text()}):", file=err)
    for problem in loaded.problems:
        print(f"  {problem}", file=err)
    if loaded.skipped > len(loaded.problems):
        print(f"  ... and {loaded.skipped - len(loaded.problems)} more", file=err)


def run_report(args: argparse.Namespace, *, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """``streammetrics report SOURCE -o FILE [--alert RULE]... [--title T] [--max-charts N]``.

    Exit codes: 0 written; 1 unreadable or empty source, unwritable output; 2 matplotlib missing,
    bad ``--alert`` rule or unknown metric, malformed ``kafka://`` source."""
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr

    def fail(message: str, code: int) -> int:
        print(f"streammetrics report: error: {message}", file=err)
        return code

    max_charts = getattr(args, "max_charts", None)
    max_charts = DEFAULT_MAX_CHARTS if max_charts is None else max_charts
    try:
        require_matplotlib()
        texts = list(args.alert or [])
        if getattr(args, "alerts", None):
            texts += load_rules_file(args.alerts)[0]
        rules = parse_rules(texts)
        if max_charts < 0:
            raise ValueError(f"--max-charts must be 0 or more, got {max_charts}")
    except MissingDependency as exc:
        return fail(str(exc), 2)
    except ValueError as exc:
        return fail(str(exc), 2)
    directory = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(directory):  # fail before reading a topic and drawing every chart
        return fail(f"cannot write {args.output}: directory {directory} does not exist", 1)
    try:
        loaded = read_source(args.source)
    except ValueError as exc:  # a malformed kafka:// URL
        return fail(str(exc), 2)
    except SourceError as exc:
        return fail(str(exc), 1)
    _warn_skipped(loaded, args.source, err)
    if not loaded.snapshots:
        return fail(f"no snapshots in {args.source}" + (" (every line was malformed)" if loaded.skipped else ""), 1)
    try:
        check_metrics(rules, known_metrics(loaded.snapshots))
        result = write_report(loaded, args.output, alerts=rules, title=args.title, source=args.source,
                              max_charts=max_charts)
    except ValueError as exc:
        return fail(str(exc), 2)
    except OSError as exc:
        return fail(f"cannot write {args.output}: {exc.strerror or exc}", 1)
    print(f"report written to {result.path}: {result.keys} keys, {result.windows} windows, {result.charts} charts "
          f"for {result.charted} keys, {result.alerts} alert{'s' if result.alerts != 1 else ''}", file=out)
    return 0
