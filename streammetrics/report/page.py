"""The report's HTML: one self-contained page (inline CSS and SVG, no scripts, no fetches)."""
from __future__ import annotations

import html
import math
from collections import defaultdict
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

from streammetrics.report.alerts import Alert, AlertRule
from streammetrics.report.charts import Chart, label_of
from streammetrics.report.history import (
    LABEL_FREE_SUMMARY,
    PARTIAL_SHARE,
    SUMMARY_METRICS,
    TASK_TITLES,
    Change,
    KeyHistory,
)
from streammetrics.report.select import HOW_CHOSEN, Selection
from streammetrics.report.sources import LoadResult, WindowSnapshot

__all__ = ["render_page", "format_value", "format_delta"]

MAX_LISTED_RANGES = 12
#: skipped input lines listed on the page (stderr lists more)
MAX_LISTED_PROBLEMS = 5
#: key names longer than this are cut in the tables (whole in a tooltip and in their section's heading)
MAX_NAME_CHARS = 80
_TASK_ORDER = {task: i for i, task in enumerate(TASK_TITLES)}

CSS = """
:root { --fg:#1d2330; --muted:#5b6475; --line:#d9dde5; --bg:#f6f7f9; --better:#1a7f37; --worse:#c62828;
        --alert:#d62728; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", "DejaVu Sans", sans-serif;
       color: var(--fg); background: var(--bg); }
header { background: #1d2330; color: #fff; padding: 18px 28px; }
header h1 { margin: 0 0 4px; font-size: 22px; }
header p { margin: 0; color: #c7cedb; }
main { padding: 8px 28px 28px; max-width: 1500px; margin: 0 auto; }
h2 { font-size: 18px; margin: 22px 0 8px; overflow-wrap: anywhere; }
h3 { font-size: 15px; margin: 14px 0 6px; color: var(--muted); }
section.card { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 4px 18px 14px;
               margin-top: 16px; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 8px; border-bottom: 1px solid var(--line); text-align: right; vertical-align: top; }
th { font-weight: 600; color: var(--muted); font-size: 12px; white-space: nowrap; }
th:first-child, td:first-child, td.text, th.text { text-align: left; }
td .v { display: block; font-weight: 600; }
td .d { display: block; font-size: 12px; white-space: nowrap; }
td:first-child { white-space: nowrap; }
.better { color: var(--better); } .worse { color: var(--worse); } .same, .changed, .n-a { color: var(--muted); }
td.alerts { text-align: left; font-size: 12px; max-width: 340px; }
.alert-tag { color: var(--alert); font-weight: 600; }
.none { color: var(--muted); }
.meta { color: var(--muted); margin: 0 0 8px; }
.note { background: #fff8e1; border-left: 4px solid #f0b429; padding: 6px 10px; margin: 8px 0; }
.charts { display: grid; grid-template-columns: repeat(6, minmax(0, 1fr)); gap: 12px; }
figure.chart { margin: 0; background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 6px; }
figure.chart.wide { grid-column: span 6; } figure.chart.half { grid-column: span 3; }
figure.chart.third { grid-column: span 2; }
figure.chart svg { width: 100%; height: auto; display: block; }
figcaption { font-size: 12px; color: var(--muted); padding: 2px 4px 0; }
.task { font-size: 12px; font-weight: 500; color: var(--muted); border: 1px solid var(--line); border-radius: 10px;
        padding: 1px 8px; margin-left: 8px; vertical-align: middle; }
a { color: #0b5fa5; }
footer { color: var(--muted); font-size: 12px; padding: 0 28px 24px; max-width: 1500px; margin: 0 auto; }
"""


#: C0 control characters other than tab and newlines, and DEL, shown as U+FFFD (as browsers show NUL)
_CONTROLS = {c: "\ufffd" for c in [*range(0, 9), 11, 12, *range(14, 32), 127]}


def esc(text: object) -> str:
    """Text for HTML content or a quoted attribute: markup characters escaped, control characters replaced."""
    return html.escape(str(text), quote=True).translate(_CONTROLS)


def format_time(ts: float, seconds: bool = False) -> str:
    """An epoch time as ``YYYY-MM-DD HH:MM[:SS]`` (UTC)."""
    fmt = "%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M"
    return datetime.fromtimestamp(ts, tz=timezone.utc).strftime(fmt)


def format_value(value: float | None, metric: str = "") -> str:
    """A metric value for the table: thousands separators for counts, 3 decimals for rates."""
    if value is None:
        return "–"
    if metric in ("count", "total_weight") or abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.1f}"
    return f"{value:.3f}"


def format_delta(change: Change) -> tuple[str, str]:
    """(text, css class) of a change: arrow, signed difference, coloured better/worse."""
    delta = change.delta
    if delta is None:
        return "–", "n-a"
    shown = format_value(abs(delta), change.metric)
    if delta == 0 or float(shown.replace(",", "")) == 0:
        return "= 0", "same"
    arrow, sign = ("▲", "+") if delta > 0 else ("▼", "−")
    return f"{arrow} {sign}{shown}", change.verdict()


def _window_seconds(history: KeyHistory) -> bool:
    return any(w.start % 60 or w.end % 60 for w in history.windows)


def _clock(history: KeyHistory) -> Any:
    """A short formatter for the key's window times: the clock time, with the date only when the
    key spans several UTC days, with seconds only when windows are not whole minutes."""
    seconds = _window_seconds(history)
    same_day = format_time(history.windows[0].start)[:10] == format_time(history.latest.end - 1e-6)[:10]

    def clock(ts: float) -> str:
        text = format_time(ts, seconds)
        return text[11:] if same_day else text[5:]

    return clock


def window_ranges(windows: Sequence[WindowSnapshot]) -> list[tuple[float, float]]:
    """Time-ordered windows as (start, end) runs: adjacent or overlapping windows join one run."""
    runs: list[list[float]] = []
    for w in windows:
        if runs and w.start <= runs[-1][1]:
            runs[-1][1] = max(runs[-1][1], w.end)
        else:
            runs.append([w.start, w.end])
    return [(a, b) for a, b in runs]


def _ranges_text(history: KeyHistory, windows: Sequence[WindowSnapshot], limit: int = MAX_LISTED_RANGES) -> str:
    """``00:04–00:05, 00:13–00:15`` (at most ``limit`` runs, then how many more)."""
    clock = _clock(history)
    runs = window_ranges(windows)
    text = ", ".join(f"{clock(a)}–{clock(b)}" for a, b in runs[:limit])
    more = len(runs) - limit
    return text + (f" … (+{more} more)" if more > 0 else "")


def _alerts_cell(history: KeyHistory) -> str:
    if not history.alerts:
        return '<td class="alerts none">none</td>'
    by_rule: dict[str, list[Alert]] = defaultdict(list)
    for a in history.alerts:
        by_rule[a.rule.text].append(a)
    items = [f'<span class="alert-tag">{esc(rule)}</span> ×{len(hits)}: '
             f'{esc(_ranges_text(history, [a.window for a in hits], limit=4))}'
             for rule, hits in by_rule.items()]
    return f'<td class="alerts">{"<br>".join(items)}</td>'


def _key_link(history: KeyHistory, anchor: str | None) -> str:
    """The key's label (cut to :data:`MAX_NAME_CHARS`, the whole name in a tooltip), linked to its
    section when it has one (charted keys)."""
    label = history.label
    if len(label) > MAX_NAME_CHARS:
        title = f' title="{esc(label)}"'
        label = label[:MAX_NAME_CHARS - 1] + "…"
    else:
        title = ""
    return f'<a href="#{anchor}"{title}>{esc(label)}</a>' if anchor else f'<span{title}>{esc(label)}</span>'


def _label_cells(history: KeyHistory) -> list[str]:
    """The latest window's labelled share (its counts below) and pending predictions (all windows' below)."""
    w = history.latest
    if w.labeled is None:  # a snapshot written before delayed labels
        return ['<td data-metric="labeled_share"><span class="v">–</span></td>',
                '<td data-metric="pending"><span class="v">–</span></td>']
    share = w.labeled_share
    if share is None:
        labelled = '<td data-metric="labeled_share"><span class="v">–</span></td>'
    else:
        labelled = (f'<td data-metric="labeled_share"><span class="v">{share:.1%}</span>'
                    f'<span class="d n-a">{w.labeled:,} of {w.count:,}</span></td>')
    total = history.label_totals()[2]
    pending = (f'<td data-metric="pending"><span class="v">{format_value(w.pending, "count")}</span>'
               f'<span class="d n-a">{total:,} in all</span></td>')
    return [labelled, pending]


def _window_cell(history: KeyHistory) -> str:
    """The summary's window (the latest complete one) and, below, the partial windows left out."""
    seconds = _window_seconds(history)
    shown = f'<span class="v">{esc(format_time(history.summary_window.start, seconds))}</span>'
    cut = history.partial
    if not cut:
        return f'<td class="text">{shown}</td>'
    events = sum(w.count for w in cut)
    what = "window" if len(cut) == 1 else f"{len(cut)} windows"
    return (f'<td class="text" data-partial="{len(cut)}">{shown}<span class="d n-a" title="cut short by the end '
            f'of the input: fewer than {PARTIAL_SHARE:.0%} of the usual events; drawn hollow in the charts">'
            f'then a partial {what} ({events:,} events) from {esc(format_time(cut[0].start, seconds))}</span></td>')


def summary_order(histories: Sequence[KeyHistory]) -> list[KeyHistory]:
    """Keys with alerts first (most alerts first, then the most recent), then the others by name."""
    def rank(h: KeyHistory) -> tuple:
        if h.alerts:
            return (0, -len(h.alerts), -max(a.window.end for a in h.alerts), h.model, h.segment)
        return (1, 0, 0.0, h.model, h.segment)

    return sorted(histories, key=rank)


def _summary_row(history: KeyHistory, anchor: str | None, metrics: Sequence[str], labels: bool = False) -> str:
    cells = [f'<td class="text">{_key_link(history, anchor)}</td>',
             f'<td>{len(history.windows)}</td>',
             _window_cell(history)]
    latest = history.latest
    for metric in metrics:
        change = history.change(metric)
        delta, css = format_delta(change)
        found = latest.changes.get(metric)
        sig = ""
        if found is not None and found.get("significant"):  # contract section 9: marked, with its test
            p = found.get("p_value")
            sig = (f'<span class="sig" title="significant change against its baseline '
                   f'{format_value(found.get("baseline"), metric)} (p = {p:.2g}, Benjamini-Hochberg)">◆</span>'
                   if isinstance(p, (int, float)) else '<span class="sig">◆</span>')
        cells.append(f'<td data-metric="{esc(metric)}"><span class="v">{format_value(change.value, metric)}{sig}</span>'
                     f'<span class="d {css}">{esc(delta)}</span></td>')
    if labels:
        cells.extend(_label_cells(history))
    cells.append(_alerts_cell(history))
    return (f'<tr data-key="{esc(history.model)}|{esc(history.segment)}" data-alerts="{len(history.alerts)}" '
            f'data-charted="{1 if anchor else 0}">' + "".join(cells) + "</tr>")


def _charted_note(histories: Sequence[KeyHistory], selection: Selection | None, charts: int,
                  anchors: dict[int, str | None]) -> str:
    """Which keys have charts and why, when not all do (a list of links to their sections)."""
    if selection is None or selection.all_keys:
        return ""
    charted = [h for h in histories if anchors.get(id(h))]
    n = len(charted)
    links = "".join(f'<li>{_key_link(h, anchors[id(h)])}: {esc("; ".join(selection.why(h)))}</li>' for h in charted)
    return (f'<p class="note" id="charted-keys">Charts for {n:,} of {len(histories):,} keys ({charts:,} charts; '
            f'at most {selection.max_charts:,}, <code>--max-charts</code>), chosen from {esc(HOW_CHOSEN)}. '
            'Every key is in this table; the names of charted keys link to their charts.</p>'
            f'<ul class="charted">{links}</ul>')


def _summary(histories: Sequence[KeyHistory], anchors: dict[int, str | None], note: str = "") -> str:
    parts = ['<section class="card" id="summary"><h2>Summary</h2>',
             '<p class="meta">Latest complete window of each key (a last window cut short by the end of the input '
             'is named below it, not compared); below each value its change against the previous window '
             '(<span class="better">green: better</span>, <span class="worse">red: worse</span>; higher is better '
             'for AUC, F1, precision, recall, accuracy, R² and their estimates; lower for log loss, Brier score, '
             'errors and drift). Keys with alerts come first; ◆: a significant change against the baseline '
             '(snapshot <code>changes</code>).</p>', note]
    by_task: dict[str, list[KeyHistory]] = defaultdict(list)
    for h in histories:
        by_task[h.task].append(h)
    for task, group in sorted(by_task.items(), key=lambda item: _TASK_ORDER.get(item[0], len(_TASK_ORDER))):
        group = summary_order(group)
        free = [m for m in LABEL_FREE_SUMMARY.get(task, ())
                if any(not math.isnan(v) for h in group for v in h.series(m))]
        base = SUMMARY_METRICS.get(task, ("count",))
        metrics = (*base[:-1], *free, base[-1]) if base[-1] == "count" else (*base, *free)
        head = "".join(f'<th data-metric="{esc(m)}">{esc(label_of(m))}</th>' for m in metrics)
        labels = any(h.delayed_labels for h in group)  # columns only where labels come late
        if labels:
            head += ('<th data-metric="labeled_share" title="share of the latest window\'s predictions with their '
                     'label (latest revision)">labelled</th><th data-metric="pending" title="predictions of the '
                     'latest window still awaiting a label; below: in all windows">pending</th>')
        rows = "".join(_summary_row(h, anchors[id(h)], metrics, labels) for h in group)
        parts.append(f'<h3>{esc(TASK_TITLES.get(task, task))}</h3>'
                     f'<table class="summary" data-task="{esc(task)}"><thead><tr><th class="text">model / segment</th>'
                     f'<th>windows</th><th class="text">latest window (UTC)</th>{head}'
                     f'<th class="text">alerts</th></tr></thead><tbody>{rows}</tbody></table>')
    parts.append("</section>")
    return "".join(parts)


def _alerts_section(histories: Sequence[KeyHistory], rules: Sequence[AlertRule],
                    anchors: dict[int, str | None]) -> str:
    parts = ['<section class="card" id="alerts"><h2>Alerts</h2>']
    if not rules:
        parts.append('<p class="meta">No alert rules given (<code>--alert \'roc_auc&lt;0.8\'</code>).</p></section>')
        return "".join(parts)
    fired = sum(len(h.alerts) for h in histories)
    rules_text = ", ".join(f"<code>{esc(r.text)}</code>" for r in rules)
    parts.append(f'<p class="meta">Rules: {rules_text}. {fired} window alert{"s" if fired != 1 else ""} fired.</p>')
    rows = []
    for h in histories:
        for rule in rules:
            hits = [a for a in h.alerts if a.rule == rule]
            if hits:
                worst = min(hits, key=lambda a: a.value) if rule.op in ("<", "<=") else max(hits, key=lambda a: a.value)
                windows = _ranges_text(h, [a.window for a in hits])
                rows.append(f'<tr class="alert" data-key="{esc(h.model)}|{esc(h.segment)}" '
                            f'data-rule="{esc(rule.text)}"><td class="text">{_key_link(h, anchors[id(h)])}</td>'
                            f'<td class="text"><span class="alert-tag">{esc(rule.text)}</span></td>'
                            f'<td>{len(hits)}</td><td>{format_value(worst.value, rule.metric)}</td>'
                            f'<td class="text">{esc(windows)}</td></tr>')
    if rows:
        parts.append('<table class="alerts"><thead><tr><th class="text">model / segment</th><th class="text">rule</th>'
                     '<th>windows</th><th>worst value</th><th class="text">when (UTC)</th></tr></thead>'
                     f'<tbody>{"".join(rows)}</tbody></table>')
    else:
        parts.append('<p class="none" id="no-alerts">No rule fired in any window.</p>')
    parts.append("</section>")
    return "".join(parts)


def _key_meta(history: KeyHistory) -> str:
    first, last = history.windows[0], history.latest
    size = last.end - last.start
    seconds = _window_seconds(history)
    slides = [b.start - a.start for a, b in zip(history.windows, history.windows[1:]) if b.start > a.start]
    hop = f" every {min(slides):g} s" if slides and min(slides) < size else ""
    bits = [f"{len(history.windows)} window{'s' if len(history.windows) != 1 else ''} of {size:g} s{hop}",
            f"{format_time(first.start, seconds)} → {format_time(last.end, seconds)} UTC",
            f"{history.total_events():,} events", f"{history.late:,} late"]
    if history.delayed_labels:
        labelled, expired, pending = history.label_totals()
        bits.append(f"delayed labels: {labelled:,} labelled, {expired:,} expired, {pending:,} pending "
                    "(latest revision of each window)")
    if history.cumulative:
        bits.append(f"{len(history.cumulative)} cumulative snapshots not charted")
    return " · ".join(bits)


def _key_notes(history: KeyHistory) -> list[str]:
    notes = []
    if not history.has_state and history.task in ("binary", "multiclass", "labels"):
        notes.append("These snapshots carry no monitor state (written with <code>--no-state</code>): the ROC and "
                     "precision-recall curves and the confusion matrix need it. Re-run <code>replay</code> / "
                     "<code>consume</code> without <code>--no-state</code> to get them.")
    elif history.has_state and not history.latest.has_state:
        notes.append("The latest window has no monitor state: its curves and confusion matrix are missing.")
    notes.extend(esc(p) for p in history.problems[:5])
    more = len(history.problems) - 5 + history.more_problems
    if more > 0:
        notes.append(f"… and {more:,} more problems with this key's snapshots")
    return notes


def _figure(chart: Chart) -> str:
    """A chart in its grid cell; the title is drawn in the SVG, the caption adds what it cannot say."""
    caption = f"<figcaption>{esc(chart.caption)}</figcaption>" if chart.caption else ""
    return (f'<figure class="chart {chart.size}" id="{esc(chart.id)}" data-chart="{esc(chart.kind)}" '
            f'title="{esc(chart.title)}">{chart.svg}{caption}</figure>')


def _worst_slices(history: KeyHistory) -> str:
    """A roll-up's latest worst slices (contract section 11): slice, metric, gap, significance."""
    rows = history.latest.slices
    if not rows:
        return ""
    metric = rows[0][1]
    body = "".join(
        f'<tr><td class="text">{esc(label)}</td><td>{format_value(value, metric)}</td>'
        f'<td>{"" if gap is None else f"{gap:+.4f}"}</td>'
        f'<td class="text">{"" if significant is None else "yes" if significant else "no"}</td></tr>'
        for label, _, value, gap, significant in rows)
    return (f'<table class="worst-slices"><caption>Worst slices of the latest window by {esc(metric)} '
            f'(gap to this roll-up)</caption><thead><tr><th class="text">slice</th><th>{esc(metric)}</th>'
            f'<th>gap</th><th class="text">significant</th></tr></thead><tbody>{body}</tbody></table>')


def _key_section(history: KeyHistory, anchor: str, charts: Sequence[Chart], why: Sequence[str] = ()) -> str:
    notes = "".join(f'<p class="note">{n}</p>' for n in _key_notes(history)) + _worst_slices(history)
    if why:
        notes = f'<p class="meta why">Charted: {esc("; ".join(why))}</p>' + notes
    return (f'<section class="card key" id="{anchor}" data-model="{esc(history.model)}" '
            f'data-segment="{esc(history.segment)}" data-task="{esc(history.task)}">'
            f'<h2>{esc(history.label)}<span class="task">{esc(TASK_TITLES.get(history.task, history.task))}</span></h2>'
            f'<p class="meta">{esc(_key_meta(history))}</p>{notes}'
            f'<div class="charts">{"".join(_figure(c) for c in charts)}</div></section>')


def _header(title: str, histories: Sequence[KeyHistory], source: str | None, loaded: LoadResult | None) -> str:
    windows = [w for h in histories for w in h.windows]
    start, end = min(w.start for w in windows), max(w.end for w in windows)
    bits = [f"{len(histories)} key{'s' if len(histories) != 1 else ''}", f"{len(windows)} windows",
            f"{format_time(start)} → {format_time(end)} UTC"]
    if source:
        bits.insert(0, f"source {source}")
    if loaded is not None and loaded.skipped:
        bits.append(f"{loaded.skipped} malformed snapshot{'s' if loaded.skipped != 1 else ''} skipped")
    if loaded is not None and loaded.superseded:
        n = loaded.superseded
        bits.append(f"{n} earlier revision{'s' if n != 1 else ''} of windows replaced by their latest")
    return f'<header><h1>{esc(title)}</h1><p>{esc(" · ".join(bits))}</p></header>'


def _skipped_section(loaded: LoadResult | None) -> str:
    """How many input lines were skipped, per reason, and the first few with their line numbers."""
    if loaded is None or not loaded.skipped:
        return ""
    items = "".join(f"<li>{esc(p)}</li>" for p in loaded.problems[:MAX_LISTED_PROBLEMS])
    more = loaded.skipped - min(len(loaded.problems), MAX_LISTED_PROBLEMS)
    tail = f"<li>… and {more:,} more</li>" if more > 0 else ""
    n = loaded.skipped
    return (f'<section class="card" id="skipped"><h2>Skipped input</h2><p class="meta">{n:,} malformed '
            f'snapshot{"s" if n != 1 else ""} skipped ({esc(loaded.reasons_text())}); the report shows the '
            f'others.</p><ul>{items}{tail}</ul></section>')


def render_page(title: str, histories: Sequence[KeyHistory], sections: Iterable[tuple[KeyHistory, str, list[Chart]]],
                rules: Sequence[AlertRule], *, source: str | None = None, loaded: LoadResult | None = None,
                generated: str = "", version: str = "", selection: Selection | None = None) -> str:
    """The whole HTML document. ``sections`` yields (history, anchor id, charts) per charted key;
    every key of ``histories`` is in the summary table."""
    sections = list(sections)
    anchors: dict[int, str | None] = {id(h): None for h in histories}
    anchors.update({id(h): anchor for h, anchor, _ in sections})
    body = "".join(_key_section(h, anchor, charts, selection.why(h) if selection else ())
                   for h, anchor, charts in sections)
    note = _charted_note(histories, selection, sum(len(c) for _, _, c in sections), anchors)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<meta name="generator" content="streammetrics {esc(version)}">'
        f'<title>{esc(title)}</title><style>{CSS}</style></head><body>'
        f'{_header(title, histories, source, loaded)}<main>'
        f'{_skipped_section(loaded)}{_summary(histories, anchors, note)}{_alerts_section(histories, rules, anchors)}'
        f'{body}</main>'
        f'<footer>streammetrics {esc(version)} · snapshot schema streammetrics.snapshot/1 · generated {esc(generated)} '
        '· times in UTC · charts drawn with matplotlib</footer></body></html>\n'
    )
