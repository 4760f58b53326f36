"""The report's charts, drawn with matplotlib and returned as inline SVG text.

Only the object-oriented API is used (``matplotlib.figure.Figure``, no pyplot): no global
figure state and no GUI backend; ``savefig(format="svg")`` renders through matplotlib's SVG
backend. Text stays text in the SVG (``svg.fonttype = "none"``): smaller files, searchable
titles. The ids inside each SVG are prefixed with its chart id (unreferenced ones dropped), so
many SVGs share one HTML page without clashes.

Every chart kind is one function ``(history, chart_id) -> Chart | None`` (None when the data
for it is missing); :data:`CHARTS` lists the kinds drawn per task, in page order. To add a kind
(e.g. a drift chart), write its function and add ``(kind, function)`` to the tasks' tuples.
:func:`charts_for` draws them, and a chart that raises becomes a note on the key, not a crash.

User text (class labels) never reaches matplotlib's mathtext (``text.parse_math`` off, so
``$\\foo$`` stays literal) and goes through :func:`chart_text` (control characters and lone
surrogates dropped, cut to :data:`MAX_LABEL_CHARS`); the SVG backend escapes ``<`` and ``&``.

Cost: figures have fixed margins (``subplots_adjust``; the confusion matrix's sized by its
longest label) rather than constrained layout, which draws every figure twice.
"""
from __future__ import annotations

import functools
import html
import io
import math
import re
import unicodedata
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Sequence

import matplotlib
import numpy as np
from matplotlib.dates import AutoDateLocator, ConciseDateFormatter
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from streammetrics.report.history import KeyHistory, quiet

__all__ = ["Chart", "charts_for", "chart_text", "CHARTS", "max_charts_of"]

UTC = timezone.utc
ALERT_COLOR = "#d62728"
#: colour-blind-safe hues (Okabe-Ito), alert red kept for alerts
COLORS = {
    "roc_auc": "#0072b2", "f1": "#e69f00", "precision": "#009e73", "recall": "#cc79a7", "accuracy": "#56b4e9",
    "log_loss": "#6a3d9a", "brier_score": "#b15928", "macro_f1": "#e69f00", "top_k_accuracy": "#999999",
    "macro_precision": "#009e73", "macro_recall": "#cc79a7", "rmse": "#0072b2", "mae": "#e69f00",
    "max_error": "#999999", "r2": "#009e73", "count": "#8da0cb",
}
CYCLE = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000",
         "#999999", "#6a3d9a"]
LATEST_COLOR, PERIOD_COLOR = "#e69f00", "#0072b2"
LABELS = {
    "roc_auc": "ROC AUC", "f1": "F1", "precision": "precision", "recall": "recall", "accuracy": "accuracy",
    "log_loss": "log loss", "brier_score": "Brier score", "macro_f1": "macro F1", "top_k_accuracy": "top-2 accuracy",
    "macro_precision": "macro precision", "macro_recall": "macro recall", "rmse": "RMSE", "mae": "MAE",
    "max_error": "max error", "r2": "R²", "mse": "MSE", "mape": "MAPE", "rmsle": "RMSLE", "count": "events",
    "drift_ks": "KS drift", "drift_psi": "PSI drift", "drift_js": "JS drift", "drift_wasserstein": "Wasserstein drift",
    "estimated_roc_auc": "est. ROC AUC", "estimated_accuracy": "est. accuracy", "estimated_f1": "est. F1",
    "estimated_precision": "est. precision", "estimated_recall": "est. recall", "estimated_macro_f1": "est. macro F1",
}
#: figure sizes (inches) by layout slot; the page scales SVGs to their grid cell
SIZES = {"wide": (12.8, 3.4), "half": (6.4, 3.4), "third": (4.3, 3.7)}
MAX_CLASS_LINES = 10
#: user text in a chart (legend entry, tick label) is cut to this many characters
MAX_LABEL_CHARS = 32
#: the confusion matrix labels its rows and columns up to this many classes (a plain heat map beyond)
MAX_CONFUSION_LABELS = 30
#: fixed margins in inches (left, right, bottom, top) by layout slot; "wide" keeps room on the right
#: for the legend
MARGINS = {"wide": (0.8, 2.4, 0.62, 0.36), "half": (0.8, 0.2, 0.62, 0.36), "third": (0.72, 0.2, 0.6, 0.36)}
#: beyond this many windows, lines show a rolling mean over the faint per-window values
SMOOTH_ABOVE = 150
RC: dict[Any, Any] = {"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10, "axes.titleweight": "bold",
      "axes.spines.top": False, "axes.spines.right": False, "axes.grid": True, "grid.alpha": 0.3,
      "legend.fontsize": 8, "legend.framealpha": 0.85, "text.parse_math": False, "text.usetex": False}


@dataclass(frozen=True)
class Chart:
    """One rendered chart: a stable id, its kind, a title, the SVG markup and a caption."""

    id: str
    kind: str
    title: str
    svg: str
    size: str = "half"
    caption: str = ""


def label_of(metric: str) -> str:
    return LABELS.get(metric, metric.replace("_", " "))


def chart_text(value: object, limit: int = MAX_LABEL_CHARS) -> str:
    """User text made safe for a chart: no control characters or lone surrogates (which no font
    draws and UTF-8 cannot encode), at most ``limit`` characters (an ellipsis marks a cut).

    >>> chart_text("$\\\\foo$\\x00"), chart_text("x" * 40, limit=8)
    ('$\\\\foo$', 'xxxxxxx…')
    """
    text = "".join(c for c in str(value) if unicodedata.category(c) not in ("Cc", "Cs"))
    return text if len(text) <= limit else text[:limit - 1] + "…"


# ---------------------------------------------------------------------- rendering
#: ids and references to them in matplotlib's SVG; prefixed with the chart id so that many SVGs
#: can share one HTML document without duplicate ids
_ID_REF = re.compile(r'(\bid="|url\(#|href="#)([^")]+)')
_UNUSED_ID = re.compile(r'\s\bid="([^"]+)"')


def _namespace_ids(svg: str, prefix: str) -> str:
    """Drop the ids nothing refers to (matplotlib's group ids) and prefix the others."""
    used = {m.group(2) for m in _ID_REF.finditer(svg) if m.group(1) != 'id="'}
    svg = _UNUSED_ID.sub(lambda m: m.group(0) if m.group(1) in used else "", svg)
    return _ID_REF.sub(lambda m: f"{m.group(1)}{prefix}-{m.group(2)}", svg)


def _render(fig: Figure, chart_id: str, title: str) -> str:
    """The figure as SVG markup for inlining (no XML prolog; ids unique per chart; labelled ``title``)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": chart_id}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
    svg = buf.getvalue()
    svg = svg[svg.index("<svg"):]
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, count=1, flags=re.S)
    svg = _namespace_ids(svg, chart_id)
    return svg.replace("<svg ", f'<svg role="img" aria-label="{html.escape(title)}" ', 1)


def _figure(size: str, margins: tuple[float, float, float, float] | None = None) -> tuple[Figure, Any]:
    """A figure of a layout slot with one axes and fixed margins (inches: left, right, bottom, top)."""
    (w, h), (left, right, bottom, top) = SIZES[size], margins or MARGINS[size]
    fig = Figure(figsize=(w, h))
    fig.subplots_adjust(left=left / w, right=1 - right / w, bottom=bottom / h, top=1 - top / h)
    return fig, fig.add_subplot()


def _chart(fig: Figure, chart_id: str, kind: str, title: str, size: str, caption: str = "") -> Chart:
    return Chart(id=chart_id, kind=kind, title=title, svg=_render(fig, chart_id, title), size=size, caption=caption)


# ---------------------------------------------------------------------- time series
def _mids(history: KeyHistory) -> list[datetime]:
    return [datetime.fromtimestamp((w.start + w.end) / 2, tz=UTC) for w in history.windows]


def _time_axis(ax: Any, history: KeyHistory) -> None:
    """UTC date ticks; every time chart of a key spans the same interval, so they line up."""
    ax.set_xlim(datetime.fromtimestamp(history.windows[0].start, tz=UTC),
                datetime.fromtimestamp(history.latest.end, tz=UTC))
    locator = AutoDateLocator(tz=UTC, minticks=3, maxticks=10)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(ConciseDateFormatter(locator, tz=UTC))
    ax.set_xlabel("window (UTC)")


def _marker_size(n: int) -> float:
    return 4.0 if n <= 40 else 2.5 if n <= SMOOTH_ABOVE else 0.0


def smoothing_span(n: int) -> int:
    """Windows per rolling mean for ``n`` windows: 1 (none) up to SMOOTH_ABOVE, then about n/60."""
    return 1 if n <= SMOOTH_ABOVE else max(2, round(n / 60))


def rolling_mean(values: Sequence[float], span: int) -> np.ndarray:
    """Centred rolling mean over ``span`` windows, ignoring NaNs (NaN where under half are defined)."""
    v = np.asarray(values, dtype=float)
    if span <= 1:
        return v
    ok = ~np.isnan(v)
    kernel = np.ones(span)
    sums = np.convolve(np.where(ok, v, 0.0), kernel, mode="same")
    counts = np.convolve(ok.astype(float), kernel, mode="same")
    return np.divide(sums, counts, out=np.full_like(v, np.nan), where=counts >= span / 2)


def _plot_series(ax: Any, x: Sequence[datetime], values: Sequence[float], color: str, label: str,
                 span: int, lw: float = 1.6, ls: str = "-") -> None:
    """One metric's line; with many windows a faint line per window under a labelled rolling mean."""
    if span <= 1:
        ax.plot(x, values, marker="o", ms=_marker_size(len(x)), lw=lw, ls=ls, zorder=3, color=color, label=label)
        return
    ax.plot(x, values, lw=0.6, ls=ls, alpha=0.3, zorder=2, color=color)
    ax.plot(x, rolling_mean(values, span), lw=lw, ls=ls, zorder=3, color=color, label=label)


def line_styles(metrics: Sequence[str]) -> dict[str, tuple[str, str]]:
    """(colour, line style) of each metric's line in one chart: every metric its own colour (its
    :data:`COLORS` entry unless another line of the chart has that colour, else the next free one of
    :data:`CYCLE`), except that ``estimated_X`` is dashed in X's colour, so each estimate pairs with
    its realised metric and no two pairs share a colour."""
    colours: dict[str, str] = {}
    for base in dict.fromkeys(ESTIMATED.get(m, m) for m in metrics):
        colour = COLORS.get(base)
        if colour is None or colour in colours.values():
            free = [c for c in CYCLE if c not in colours.values()]
            colour = free[0] if free else CYCLE[len(colours) % len(CYCLE)]
        colours[base] = colour
    return {m: (colours[ESTIMATED.get(m, m)], "--" if m in ESTIMATED else "-") for m in metrics}


def _partial_indexes(history: KeyHistory) -> list[int]:
    """Positions of the windows cut short by the end of the input (``KeyHistory.partial``)."""
    cut = {id(w) for w in history.partial}
    return [i for i, w in enumerate(history.windows) if id(w) in cut]


#: how a partial window (cut short by the end of the input) is drawn: apart from the line, hollow
PARTIAL_LABEL = "partial window (input ended)"


def _smoothing_caption(span: int) -> str:
    return f"lines: rolling mean over {span} windows; faint: each window" if span > 1 else ""


def _alert_layers(ax: Any, history: KeyHistory, drawn: Sequence[str]) -> list[Any]:
    """Shade every alerted window; ring the points and draw the bound of rules on ``drawn`` metrics.
    Returns extra legend handles."""
    handles: list[Any] = []
    alerted = history.alerted()
    for w in alerted:
        ax.axvspan(datetime.fromtimestamp(w.start, tz=UTC), datetime.fromtimestamp(w.end, tz=UTC),
                   color=ALERT_COLOR, alpha=0.10, lw=0, zorder=0)
    if alerted:
        handles.append(Patch(color=ALERT_COLOR, alpha=0.25, label="alert fired"))
    rules = {a.rule.text: a.rule for a in history.alerts if a.rule.metric in drawn}
    for text, rule in rules.items():
        hits = [a for a in history.alerts if a.rule.text == text]
        xs = [datetime.fromtimestamp((a.window.start + a.window.end) / 2, tz=UTC) for a in hits]
        ring = 70 if len(history.windows) <= SMOOTH_ABOVE else 25
        handles.append(ax.scatter(xs, [a.value for a in hits], s=ring, facecolors="none", edgecolors=ALERT_COLOR,
                                  linewidths=1.5 if ring > 30 else 1.0, zorder=5, label=f"alert {text}"))
        ax.axhline(rule.threshold, color=ALERT_COLOR, lw=0.9, ls="--", zorder=1)
    return handles


def _finish_legend(ax: Any, size: str, extra: Sequence[Any] = ()) -> None:
    handles, labels = ax.get_legend_handles_labels()
    for h in extra:
        if h.get_label() not in labels:
            handles.append(h)
            labels.append(h.get_label())
    if not handles:
        return
    if size == "wide":
        ax.legend(handles, labels, loc="center left", bbox_to_anchor=(1.01, 0.5))
    else:
        ax.legend(handles, labels, loc="best")


def _clamp_unit(ax: Any) -> None:
    """Keep a 0..1 metric axis within [0, 1] (plus room for markers) after autoscaling."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(max(lo, -0.02), min(hi, 1.02))


def metric_lines(history: KeyHistory, chart_id: str, kind: str, title: str, metrics: Sequence[str], *,
                 size: str = "half", unit: bool = False, ylabel: str = "", band: tuple[str, str] | None = None,
                 caption: str = "") -> Chart | None:
    """One line per metric over the windows (gaps where undefined), alerts marked.

    ``band=(low, high)`` shades the interval between two metrics (ROC AUC's guaranteed bounds)."""
    present = [m for m in metrics if any(not math.isnan(v) for v in history.series(m))]
    if not present:
        return None
    x = _mids(history)
    span = smoothing_span(len(x))
    fig, ax = _figure(size)
    styles = line_styles(present)
    cut = _partial_indexes(history)
    if band is not None:
        low, high = (np.array(history.series(b)) for b in band)
        low[cut] = high[cut] = np.nan
        if not np.all(np.isnan(low)):
            ax.fill_between(x, low, high, color=styles[present[0]][0], alpha=0.25, lw=0, zorder=2,
                            label=f"{label_of(present[0])} guaranteed bounds")
    marked = False
    for metric in present:
        values = np.array(history.series(metric))
        colour, ls = styles[metric]
        low_i, high_i = (np.array(v) for v in history.interval_series(metric))
        if not np.all(np.isnan(low_i)):  # the confidence interval (contract section 9) as a light band
            ax.fill_between(x, low_i, high_i, color=colour, alpha=0.12, lw=0, zorder=1)
        line = values.copy()
        line[cut] = np.nan  # a window cut by the end of the input is no drop: drawn apart
        _plot_series(ax, x, line, colour, label_of(metric), span, ls=ls)
        if cut:
            ax.scatter([x[i] for i in cut], values[cut], s=28, facecolors="none", edgecolors=colour, linewidths=1.2,
                       zorder=4)
        sig = np.array(history.significant(metric), dtype=bool)
        if sig.any():  # significant changes against the baseline (contract section 9): filled diamonds
            ax.scatter(np.asarray(x)[sig], values[sig], marker="D", s=40, color=colour, zorder=6)
            marked = True
    if any(w.intervals for w in history.windows):
        caption = "; ".join(filter(None, [caption, f"light bands: {_confidence_of(history)} confidence intervals"]))
    if marked:
        caption = "; ".join(filter(None, [caption, "diamonds: significant changes (Benjamini-Hochberg)"]))
    extra = _alert_layers(ax, history, present)
    if cut:
        extra.append(Line2D([], [], ls="none", marker="o", mfc="none", mec="#555555", label=PARTIAL_LABEL))
    bound = "dashed red line: the alert rule's bound" if any(a.rule.metric in present for a in history.alerts) else ""
    hollow = f"hollow: {PARTIAL_LABEL}, fewer events than usual" if cut else ""
    caption = "; ".join(filter(None, [caption, _smoothing_caption(span), bound, hollow]))
    if unit:
        _clamp_unit(ax)
    _time_axis(ax, history)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    _finish_legend(ax, size, extra)
    return _chart(fig, chart_id, kind, title, size, caption)


def _confidence_of(history: KeyHistory) -> str:
    """The intervals' confidence as a percentage (the latest window's), "" when unknown."""
    for w in reversed(history.windows):
        c = w.intervals_confidence
        if c is not None:
            return f"{100 * c:g}%"
    return ""


def class_lines(history: KeyHistory, chart_id: str, kind: str, metric: str, *, size: str = "half",
                highest: bool = False) -> Chart | None:
    """Per-class ``metric`` over the windows; with many classes the lowest-latest ones only
    (``highest``: the highest-latest, e.g. drift)."""
    classes = history.classes
    if not classes:
        return None
    series = {c: history.class_series(c, metric) for c in classes}
    shown = classes
    caption = ""
    if len(classes) > MAX_CLASS_LINES:
        sign = -1.0 if highest else 1.0
        last = {c: sign * next((v for v in reversed(s) if not math.isnan(v)), sign * math.inf)
                for c, s in series.items()}
        shown = sorted(classes, key=lambda c: last[c])[:MAX_CLASS_LINES]
        caption = (f"the {MAX_CLASS_LINES} classes with the {'highest' if highest else 'lowest'} latest {metric} "
                   f"of {len(classes)}")
    x = _mids(history)
    span = smoothing_span(len(x))
    caption = "; ".join(filter(None, [caption, _smoothing_caption(span)]))
    title = f"Per-class {metric} over time"
    fig, ax = _figure(size)
    for i, c in enumerate(shown):
        _plot_series(ax, x, series[c], CYCLE[i % len(CYCLE)], chart_text(c), span, lw=1.4)
    extra = _alert_layers(ax, history, ())
    _clamp_unit(ax)
    _time_axis(ax, history)
    ax.set_ylabel(metric)
    ax.set_title(title)
    _finish_legend(ax, size, extra)
    return _chart(fig, chart_id, kind, title, size, caption)


def window_hop(history: KeyHistory) -> float:
    """Seconds between window starts: the smallest gap between consecutive starts (the slide of
    hopping windows), or the window size when there is one window or none is closer."""
    size = min(w.end - w.start for w in history.windows)
    gaps = [b.start - a.start for a, b in zip(history.windows, history.windows[1:]) if b.start > a.start]
    return min([size, *gaps])


def _duration_text(seconds: float) -> str:
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= n and seconds % n == 0:
            return f"{seconds // n:g}{unit}"
    return f"{seconds:g}s"


def count_bars(history: KeyHistory, chart_id: str, *, size: str = "half") -> Chart:
    """Events per window as bars, one bar per window, alerts shaded."""
    fig, ax = _figure(size)
    starts = [datetime.fromtimestamp(w.start, tz=UTC) for w in history.windows]
    hop = window_hop(history)
    # matplotlib dates are in days; hopping windows overlap, so each bar is one hop wide (they tile)
    widths = [min(w.end - w.start, hop) / 86400.0 for w in history.windows]
    many = len(starts) > 60  # white gaps between bars would hide thin bars
    style = {"width": widths, "align": "edge", "edgecolor": "none" if many else "white", "lw": 0 if many else 0.5,
             "antialiased": not many, "zorder": 3}
    if history.delayed_labels:  # stacked: labelled, expired, awaiting a label (latest revision of each window)
        bottom = np.zeros(len(starts))
        for name, color, label in LABEL_STACK:
            values = np.array([getattr(w, name) if getattr(w, name) is not None else
                               (w.count if name == "labeled" else 0) for w in history.windows], dtype=float)
            ax.bar(starts, values, bottom=bottom, color=color, label=label, **style)
            bottom += values
        ax.set_ylim(0, max(float(bottom.max()), 1.0) * 1.3)  # room for the three-entry legend above the bars
    else:
        ax.bar(starts, [w.count for w in history.windows], color=COLORS["count"], label="events", **style)
    cut = _partial_indexes(history)
    if cut:  # cut short by the end of the input: hatched over the bar
        ax.bar([starts[i] for i in cut], [history.windows[i].count for i in cut], width=[widths[i] for i in cut],
               align="edge", color="none", edgecolor="#555555", hatch="////", lw=0.6, zorder=4, label=PARTIAL_LABEL)
    extra = _alert_layers(ax, history, ())
    _time_axis(ax, history)
    ax.set_ylabel("events")
    title = "Events per window"
    ax.set_title(title)
    _finish_legend(ax, size, extra)
    late = history.late
    caption = f"{late:,} late events dropped for this key" if late else ""
    overlapping = any(w.end - w.start > hop for w in history.windows)
    if overlapping:
        caption = "; ".join(filter(None, [f"hopping windows: each bar is the window starting there, drawn "
                                          f"{_duration_text(hop)} wide (one hop) so that bars do not overlap",
                                          caption]))
    if history.delayed_labels:
        caption = "; ".join(filter(None, ["predictions per window by label status at the window's latest revision",
                                          caption]))
    return _chart(fig, chart_id, "count", title, size, caption)


# ---------------------------------------------------------------------- delayed labels
#: the stacked bars of a key with delayed labels: (snapshot field, colour, legend)
LABEL_STACK = (("labeled", "#0072b2", "labelled"), ("expired", "#999999", "expired (no label in time)"),
               ("pending", "#9ecae1", "awaiting a label"))
#: the label-arrival chart pools shares into at most this many age bins
MAX_AGE_BINS = 60
_AGE_UNITS = ((120.0, 1.0, "seconds"), (7200.0, 60.0, "minutes"), (172800.0, 3600.0, "hours"),
              (math.inf, 86400.0, "days"))


def _age_unit(longest: float) -> tuple[float, str]:
    """(seconds per unit, unit name) for ages up to ``longest`` seconds."""
    return next((per, name) for below, per, name in _AGE_UNITS if longest < below)


def label_arrival_points(history: KeyHistory) -> list[tuple[list[float], list[float], list[int], bool]]:
    """Per window with label counts: (ages in seconds, labelled shares, prediction counts, still pending)
    of each revision seen, in revision order.

    The latest revision's age is the window's age now: ``history.now`` (the latest window end of
    the input) minus the window's end; nothing later was written for it, so its share holds now. An
    earlier revision's age is the stream clock when it was written
    (:attr:`~streammetrics.report.sources.WindowSnapshot.clock`, a lower bound) minus the window's end."""
    out = []
    for w in history.windows:
        if w.labeled is None or w.count <= 0:
            continue
        now = max(history.now, w.clock, w.end)
        ages, shares, counts = [], [], []
        for r in w.revisions[:-1]:
            if r.predictions > 0 and r.revision < w.revision:
                ages.append(min(max(r.clock - w.end, 0.0), now - w.end))
                shares.append(r.labeled / r.predictions)
                counts.append(r.predictions)
        ages.append(now - w.end)
        shares.append(w.labeled / w.count)
        counts.append(w.count)
        out.append((ages, shares, counts, bool(w.pending)))
    return out


def label_arrival(history: KeyHistory, chart_id: str, *, size: str = "half") -> Chart | None:
    """Label arrival: each window's labelled share against its age (:func:`label_arrival_points`).
    Latest revisions are large dots (hollow while predictions still await labels), a window's earlier
    revisions are joined to it by a faint line, and with enough ages a line pools every point in age
    bins (labelled / predictions). Drawn only for keys with delayed labels."""
    from matplotlib.collections import LineCollection

    if not history.delayed_labels:
        return None
    points = label_arrival_points(history)
    if not points:
        return None
    all_ages = np.array([a for ages, _, _, _ in points for a in ages])
    top = float(all_ages.max())
    per, unit = _age_unit(top)
    fig, ax = _figure(size)
    paths = [np.column_stack([np.array(ages) / per, shares]) for ages, shares, _, _ in points if len(ages) > 1]
    if paths:
        ax.add_collection(LineCollection(paths, colors="#9aa3b2", linewidths=0.7, alpha=0.6, zorder=2))
        ax.scatter([a / per for ages, _, _, _ in points for a in ages[:-1]],
                   [s for _, shares, _, _ in points for s in shares[:-1]], s=8, color="#9aa3b2", zorder=3,
                   label="earlier revision")
    color = LABEL_STACK[0][1]
    for pending, label in ((False, "latest revision, final"), (True, "latest revision, labels pending")):
        chosen = [(ages[-1] / per, shares[-1]) for ages, shares, _, p in points if p == pending]
        if chosen:
            xs, ys = zip(*chosen)
            ax.scatter(xs, ys, s=22, zorder=4, label=label, facecolors="none" if pending else color,
                       edgecolors=color, linewidths=1.2)
    nbins = min(MAX_AGE_BINS, len(np.unique(all_ages)))
    if top > 0 and nbins >= 3:  # pooled share per age bin: labelled / predictions of every point in the bin
        shares = np.array([s for _, ss, _, _ in points for s in ss])
        counts = np.array([c for _, _, cs, _ in points for c in cs], dtype=float)
        edges = np.linspace(0.0, top, nbins + 1)
        which = np.clip(np.searchsorted(edges, all_ages, side="right") - 1, 0, nbins - 1)
        total = np.bincount(which, weights=counts, minlength=nbins)
        labelled = np.bincount(which, weights=counts * shares, minlength=nbins)
        used = total > 0
        mids = (edges[:-1] + edges[1:]) / 2
        ax.plot(mids[used] / per, labelled[used] / total[used], color="#e69f00", lw=1.6, zorder=5,
                label=f"pooled ({nbins} age bins)")
    ax.set_ylim(-0.03, 1.05)
    span = top / per if top > 0 else 1.0
    ax.set_xlim(-0.03 * span, 1.03 * span)
    ax.set_xlabel(f"window age ({unit} after the window's end)")
    ax.set_ylabel("share of predictions labelled")
    title = "Label arrival: share labelled vs window age"
    ax.set_title(title)
    ax.legend(loc="lower right")
    caption = ("large dots: each window's labelled share now (latest revision) against its age now (the input's "
               "latest window end minus the window's end; hollow: labels still pending); small dots: earlier "
               "revisions, at the latest window end written before them (a lower bound of their age)")
    return _chart(fig, chart_id, "label-arrival", title, size, caption)


# ---------------------------------------------------------------------- curves
def _curve_sources(history: KeyHistory) -> list[tuple[str, Any, str]]:
    """(legend name, monitor, colour) for the whole period and the latest window, where state exists."""
    out = []
    if history.period is not None:
        mon, used = history.period
        out.append((f"whole period ({used} windows)", mon, PERIOD_COLOR))
    if history.latest_monitor is not None:
        out.append(("latest window", history.latest_monitor, LATEST_COLOR))
    return out


def _finite(*arrays: np.ndarray) -> bool:
    return all(len(a) > 0 and np.all(np.isfinite(a)) for a in arrays)


def _undefined_note(ax: Any, names: list[str]) -> None:
    if names:
        ax.text(0.5, 0.04, "undefined (one class only): " + ", ".join(names), transform=ax.transAxes,
                ha="center", fontsize=8, color="#555555")


def roc_chart(history: KeyHistory, chart_id: str, *, size: str = "third") -> Chart | None:
    """ROC curves of the latest window and of the whole period (binary keys with state)."""
    sources = _curve_sources(history)
    if not sources:
        return None
    fig, ax = _figure(size)
    ax.plot([0, 1], [0, 1], ls=":", color="#888888", lw=1, label="chance")
    undefined = []
    for name, mon, color in sources:
        fpr, tpr, _ = quiet(mon.scores.roc_curve)
        if not _finite(fpr, tpr):
            undefined.append(name)
            continue
        auc = quiet(mon.scores.roc_auc)
        ax.plot(fpr, tpr, color=color, lw=1.8, label=f"{name}, AUC {auc:.3f}")
    _undefined_note(ax, undefined)
    ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="false positive rate", ylabel="true positive rate")
    ax.set_aspect("equal", adjustable="box")
    title = "ROC curve"
    ax.set_title(title)
    ax.legend(loc="lower right")
    return _chart(fig, chart_id, "roc", title, size)


def pr_chart(history: KeyHistory, chart_id: str, *, size: str = "third") -> Chart | None:
    """Precision-recall curves of the latest window and of the whole period, positive-rate baseline."""
    sources = _curve_sources(history)
    if not sources:
        return None
    fig, ax = _figure(size)
    undefined = []
    for name, mon, color in sources:
        precision, recall, _ = quiet(mon.scores.precision_recall_curve)
        if not _finite(precision, recall) or mon.scores.total_weight <= 0:
            undefined.append(name)
            continue
        ap = quiet(mon.scores.average_precision)
        ax.plot(recall, precision, drawstyle="steps-post", color=color, lw=1.8, label=f"{name}, AP {ap:.3f}")
        rate = mon.snapshot().get("positive_rate")
        if rate is not None:
            ax.axhline(rate, color=color, ls=":", lw=1)
    _undefined_note(ax, undefined)
    ax.set(xlim=(0, 1), ylim=(0, 1.02), xlabel="recall", ylabel="precision")
    ax.set_aspect("equal", adjustable="box")
    title = "Precision-recall curve"
    ax.set_title(title)
    ax.legend(loc="lower left")
    return _chart(fig, chart_id, "pr", title, size, caption="dotted: positive rate (a random ranking's precision)")


def _confusion_of(history: KeyHistory, monitor: Any) -> tuple[np.ndarray, list] | None:
    """(matrix, labels) of a monitor's confusion matrix (rows true, columns predicted)."""
    if history.task == "binary":
        return monitor.confusion.matrix([0, 1]), ["0 (negative)", "1 (positive)"]
    if history.task == "multiclass":
        labels = list(monitor.classes)
        return monitor.scores.confusion().matrix(labels), labels
    if history.task == "labels":
        labels = list(monitor.confusion.labels)
        return (monitor.confusion.matrix(labels), labels) if labels else None
    return None


def confusion_chart(history: KeyHistory, chart_id: str, *, size: str = "third") -> Chart | None:
    """Heatmap of the latest window's confusion matrix: counts and row (true-class) shares."""
    monitor = history.latest_monitor
    found = _confusion_of(history, monitor) if monitor is not None else None
    if found is None:
        return None
    matrix, labels = found
    n = len(labels)
    names = [chart_text(label, 16) for label in labels] if n <= MAX_CONFUSION_LABELS else []
    longest = max((len(name) for name in names), default=0)
    left = min(max(0.6, 0.35 + 0.07 * longest), 1.5)  # room for the row labels (about 0.07 in per character)
    bottom = 0.6 if n <= 4 else min(max(0.6, 0.45 + 0.05 * longest), 1.3)  # rotated column labels
    fig, ax = _figure(size, margins=(left, 0.45, bottom, 0.36))
    totals = matrix.sum(axis=1, keepdims=True)
    shares = np.divide(matrix, totals, out=np.zeros_like(matrix, dtype=float), where=totals > 0)
    image = ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
    fig.colorbar(image, ax=ax, shrink=0.8, label="share of the true class")
    if n <= 12:
        for i in range(n):
            for j in range(n):
                count = matrix[i, j]
                text = f"{count:,.0f}" if float(count).is_integer() else f"{count:,.1f}"
                ax.text(j, i, f"{text}\n{shares[i, j]:.0%}", ha="center", va="center",
                        fontsize=9 if n <= 4 else 7, color="white" if shares[i, j] > 0.55 else "#222222")
    if names:
        ticks = range(n)
        ax.set_xticks(ticks, names, rotation=0 if n <= 4 else 45, ha="center" if n <= 4 else "right")
        ax.set_yticks(ticks, names)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    ax.set(xlabel="predicted", ylabel="true")
    ax.grid(False)
    title = "Confusion matrix, latest window"
    ax.set_title(title)
    caption = "" if history.task != "binary" else f"threshold {getattr(monitor, 'threshold', 0.5):g}"
    return _chart(fig, chart_id, "confusion", title, size, caption)


# ---------------------------------------------------------------------- per task
ChartFunction = Callable[[KeyHistory, str], "Chart | None"]


def binary_quality(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "quality", "Ranking and classification quality per window",
                        ["roc_auc", "f1", "precision", "recall", "accuracy"], size="wide", unit=True,
                        band=("roc_auc_low", "roc_auc_high"),
                        caption=_band_caption(history, "roc_auc_low", "roc_auc_high", "ROC AUC"))


def binary_loss(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "loss", "Probabilistic loss per window (lower is better)",
                        ["log_loss", "brier_score"])


def multiclass_quality(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "quality", "Quality per window",
                        ["accuracy", "macro_f1", "roc_auc", "top_k_accuracy"], size="wide", unit=True,
                        caption="ROC AUC: one-vs-rest, macro average")


def multiclass_loss(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "loss", "Log loss per window (lower is better)", ["log_loss"],
                        size="third")


def labels_quality(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "quality", "Quality per window",
                        ["accuracy", "macro_f1", "macro_precision", "macro_recall"], size="wide", unit=True)


def regression_errors(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "errors", "Errors per window (lower is better)",
                        ["rmse", "mae", "max_error"], size="wide", ylabel="target units")


def regression_r2(history: KeyHistory, chart_id: str) -> Chart | None:
    return metric_lines(history, chart_id, "r2", "R² per window (higher is better)", ["r2"])


class_recall = functools.partial(class_lines, kind="class-recall", metric="recall")
class_precision = functools.partial(class_lines, kind="class-precision", metric="precision")
events_bars_small = functools.partial(count_bars, size="third")
confusion_half = functools.partial(confusion_chart, size="half")


# ---------------------------------------------------------------------- label-free (--reference)
def _band_caption(history: KeyHistory, low: str, high: str, what: str) -> str:
    widths = np.array(history.series(high)) - np.array(history.series(low))
    if np.all(np.isnan(widths)):
        return ""
    return f"band: {what} guaranteed bounds (widest {np.nanmax(widths):.2g})"


def drift_chart(history: KeyHistory, chart_id: str) -> Chart | None:
    """Score drift against the key's reference per window (``--reference``): KS with its
    guaranteed bounds as a band, PSI and JS on the reference's deciles; multiclass keys also
    the predicted-class PSI/JS. None without a reference."""
    metrics = ["drift_ks", "drift_psi", "drift_js", "drift_predicted_psi", "drift_predicted_js"]
    return metric_lines(history, chart_id, "drift", "Score drift against the reference per window", metrics,
                        size="half", band=("drift_ks_low", "drift_ks_high"),
                        caption=_band_caption(history, "drift_ks_low", "drift_ks_high", "KS"))


def class_drift(history: KeyHistory, chart_id: str) -> Chart | None:
    """Per-class score drift (KS of each class's score column, every prediction, against the
    reference's) per window: multiclass keys with ``--reference``. None without it."""
    if not any(not math.isnan(v) for c in history.classes for v in history.class_series(c, "drift_ks")):
        return None
    return class_lines(history, chart_id, "class-drift", "drift_ks", highest=True)


#: estimated metric -> the realised one drawn beside it
ESTIMATED = {"estimated_roc_auc": "roc_auc", "estimated_accuracy": "accuracy", "estimated_f1": "f1",
             "estimated_precision": "precision", "estimated_recall": "recall",
             "estimated_macro_f1": "macro_f1"}


def estimated_chart(history: KeyHistory, chart_id: str) -> Chart | None:
    """Estimated (CBPE, from the reference) beside realised performance per window: each
    ``estimated_*`` metric present and its realised metric. None without estimates."""
    shown = [m for m in ("estimated_roc_auc", "estimated_accuracy", "estimated_f1", "estimated_macro_f1")
             if any(not math.isnan(v) for v in history.series(m))]
    if not shown:
        return None
    metrics = [x for m in shown for x in (m, ESTIMATED[m])]
    return metric_lines(history, chart_id, "estimated", "Estimated (CBPE) and realised performance per window",
                        metrics, size="half", unit=True,
                        caption="dashed: estimated (CBPE) from the reference's calibration, without the window's "
                                "labels; solid, same colour: realised")


def reliability_chart(history: KeyHistory, chart_id: str, *, size: str = "third") -> Chart | None:
    """Reliability diagram (``sklearn.calibration.calibration_curve``, 10 uniform bins) of the
    latest window and of the whole period, from the state (labelled binary keys whose snapshots
    carry ``ece``, i.e. made with ``--reference``); on bins the mean label's guaranteed
    bounds as error bars."""
    from streammetrics.monitors.reference import reliability

    if not _has_any(history, NEEDS_REFERENCE["reliability"]):
        return None  # drawn with the other label-free views (snapshots made with --reference)
    sources = _curve_sources(history)
    drawn = []
    fig, ax = _figure(size)
    ax.plot([0, 1], [0, 1], ls=":", color="#888888", lw=1, label="perfectly calibrated")
    for name, mon, color in sources:
        try:
            curve = reliability(mon)
        except (TypeError, ValueError):  # no labels, or scores outside [0, 1]
            continue
        x, y = np.array(curve["prob_pred"]), np.array(curve["prob_true"])
        if not _finite(x, y):
            continue
        ax.plot(x, y, marker="o", ms=3, color=color, lw=1.5, label=name)
        bounds = curve["bounds"]
        if bounds is not None and len(bounds["true_low"]) == len(y):
            lo, hi = np.array(bounds["true_low"]), np.array(bounds["true_high"])
            ax.errorbar(x, y, yerr=[np.maximum(y - lo, 0), np.maximum(hi - y, 0)], fmt="none", ecolor=color,
                        alpha=0.5, lw=1)
        drawn.append(name)
    if not drawn:
        fig.clf()
        return None
    ax.set(xlim=(0, 1), ylim=(0, 1.01), xlabel="mean score", ylabel="fraction of positives")
    ax.set_aspect("equal", adjustable="box")
    title = "Reliability diagram"
    ax.set_title(title)
    ax.legend(loc="upper left")
    return _chart(fig, chart_id, "reliability", title, size)


#: the charts of a key's section per task, in page order: (kind, function); ids are ``<prefix>-<kind>``
CHARTS: dict[str, tuple[tuple[str, ChartFunction], ...]] = {
    "binary": (("quality", binary_quality), ("loss", binary_loss), ("count", count_bars), ("roc", roc_chart),
               ("pr", pr_chart), ("confusion", confusion_chart), ("drift", drift_chart), ("estimated", estimated_chart),
               ("reliability", reliability_chart)),
    "multiclass": (("quality", multiclass_quality), ("class-recall", class_recall),
                   ("class-precision", class_precision), ("loss", multiclass_loss), ("count", events_bars_small),
                   ("confusion", confusion_chart), ("drift", drift_chart), ("class-drift", class_drift),
                   ("estimated", estimated_chart)),
    "labels": (("quality", labels_quality), ("class-recall", class_recall), ("class-precision", class_precision),
               ("count", count_bars), ("confusion", confusion_half)),
    "regression": (("errors", regression_errors), ("r2", regression_r2), ("count", count_bars)),
}
_GENERIC: tuple[tuple[str, ChartFunction], ...] = (("count", count_bars),)
# the label-arrival chart ends every section (drawn only for keys with delayed labels: NEEDS_DELAYED_LABELS)
CHARTS = {task: (*kinds, ("label-arrival", label_arrival)) for task, kinds in CHARTS.items()}
_GENERIC = (*_GENERIC, ("label-arrival", label_arrival))


#: chart kinds drawn from the monitor state (none without it)
NEEDS_STATE = frozenset({"roc", "pr", "confusion", "reliability"})
#: chart kinds drawn only for keys whose snapshots carry these metrics (``--reference``)
NEEDS_REFERENCE = {"drift": ("drift_ks", "drift_psi", "drift_js", "drift_predicted_psi"), "class-drift": ("drift_ks",),
                   "estimated": tuple(ESTIMATED), "reliability": ("ece",)}
#: chart kinds drawn only for keys with delayed labels (:attr:`KeyHistory.delayed_labels`)
NEEDS_DELAYED_LABELS = frozenset({"label-arrival"})


def _has_any(history: KeyHistory, metrics: Sequence[str]) -> bool:
    return any(not math.isnan(v) for m in metrics for v in history.series(m))


def max_charts_of(history: KeyHistory) -> int:
    """The most charts :func:`charts_for` draws for ``history`` (some may be missing for lack of data)."""
    kinds = [kind for kind, _ in CHARTS.get(history.task, _GENERIC)
             if (kind not in NEEDS_REFERENCE or _has_any(history, NEEDS_REFERENCE[kind]))
             and (kind not in NEEDS_DELAYED_LABELS or history.delayed_labels)]
    return len(kinds) if history.has_state else sum(kind not in NEEDS_STATE for kind in kinds)


def charts_for(history: KeyHistory, id_prefix: str) -> list[Chart]:
    """Every chart of a key's section; ids are ``<id_prefix>-<kind>``. A chart whose drawing raises
    is left out and noted on the key (``history.problems``)."""
    charts = []
    with matplotlib.rc_context(RC), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. missing glyphs of unusual class labels
        for kind, draw in CHARTS.get(history.task, _GENERIC):
            try:
                chart = draw(history, f"{id_prefix}-{kind}")
            except Exception as exc:  # noqa: BLE001 - one bad chart must not lose the report
                history.note(f"the {kind} chart could not be drawn ({type(exc).__name__}: {str(exc)[:200]})")
                continue
            if chart is not None:
                charts.append(chart)
    return charts
