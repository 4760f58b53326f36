"""Alert rules against peers on generated streams: false alarms per 1,000 windows and detection delay.

Four streams of one-minute windows (``--windows`` of them, ``--events`` predictions each, from
a binormal model whose ROC AUC is 0.85 while healthy), the change at the middle window:

* ``no_change``: healthy throughout;
* ``auc_drop``: the separation falls at the change (ROC AUC 0.85 -> 0.76);
* ``calibration_drift``: from the change on, the scores' logits drift upward by 0.01 more
  each window (ranking, so ROC AUC, unchanged; log loss rises slowly);
* ``prevalence_shift``: positives fall from 20% to 5% at the change; quality unchanged.

Each stream goes through the real replay pipeline (``Pipeline``: windows, snapshots with their
intervals) and an :class:`~streammetrics.stream.alerting.AlertEngine` with one rule per method:

* ``static``: a fixed bound on the window's value, about two standard deviations of a healthy
  window from its mean (``roc_auc<0.80``, ``log_loss>0.41``);
* ``interval``: the same bound on the far end of the window's interval (``roc_auc.high<0.80``);
* ``band``: the reference's mean -/+ 3 standard deviations over its own windows (``band(3)``,
  NannyML's ``StandardDeviationThreshold``; the reference is a separate healthy stream);
* ``sequential``: Page-Hinkley over the key's window series (``roc_auc.drop>0.5``,
  ``log_loss.rise>0.4``: about 20 standard deviations of a window's value);

and, on the same metric series, river's ``ADWIN`` (defaults) and ``PageHinkley`` (its
forgetting factor, with the sequential rule's threshold and ``min_instances=5``) where river
is installed. NannyML's thresholds are the ``band`` method
(NannyML itself is not installed here: its ``StandardDeviationThreshold`` is
``mean ± 3·std`` of the reference chunks, computed the same way).

A false alarm is a firing before the change (or anywhere on ``no_change`` and, for quality
rules, on ``prevalence_shift``); the delay is the number of windows from the change to the first
firing at or after it. Targets, printed met/MISSED: ``interval``, ``band`` and ``sequential``
each raise fewer false alarms than ``static`` on ``no_change``; ``interval`` never fires on
``prevalence_shift``; on each change stream some method other than ``static`` detects with a
delay no longer than ``static``'s.

    python benchmarks/bench_alerts.py            # 1,000 windows of 400 events per stream
    python benchmarks/bench_alerts.py --quick    # 200 windows
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from typing import Any

import numpy as np

from streammetrics.stream.alerting import AlertEngine, parse_rules, reference_bands
from streammetrics.stream.pipeline import Pipeline, PipelineConfig

STREAMS = ("no_change", "auc_drop", "calibration_drift", "prevalence_shift")
#: (metric, direction of a degradation, static bound, Page-Hinkley threshold) per stream
#: (static bounds about two standard deviations of a healthy window's value from its mean: AUC
#: 0.85 ± 0.025, log loss 0.373 ± 0.020 at 400 events; Page-Hinkley's threshold about 20 of them)
WATCH = {"no_change": ("roc_auc", "<", 0.80, 0.5), "auc_drop": ("roc_auc", "<", 0.80, 0.5),
         "calibration_drift": ("log_loss", ">", 0.41, 0.4), "prevalence_shift": ("roc_auc", "<", 0.80, 0.5)}
D_HEALTHY, D_DROPPED = 1.466, 1.0  # binormal separations: ROC AUC Φ(d/√2) = 0.850, 0.760


def stream_lines(kind: str, windows: int, per_window: int, seed: int) -> list[bytes]:
    """The stream's events as JSONL lines, one-minute windows from ts 0."""
    rng = np.random.default_rng(seed)
    change = windows // 2
    lines = []
    for w in range(windows):
        after = w >= change
        prevalence = 0.05 if (kind == "prevalence_shift" and after) else 0.2
        d = D_DROPPED if (kind == "auc_drop" and after) else D_HEALTHY
        y = (rng.random(per_window) < prevalence).astype(int)
        logit = d * y - d / 2 + rng.normal(0, 1, per_window) - 1.0  # calibrated-ish at 20% prevalence
        if kind == "calibration_drift" and after:
            logit = logit + 0.01 * (w - change)
        score = 1 / (1 + np.exp(-logit))
        ts = w * 60 + np.sort(rng.uniform(0, 60, per_window))
        lines += [json.dumps({"ts": round(float(t), 6), "model": "m", "y_true": int(a), "score": float(s)}).encode()
                  for t, a, s in zip(ts, y, score)]
    return lines


def snapshots(lines: list[bytes]) -> list[dict[str, Any]]:
    pipeline = Pipeline(PipelineConfig(task="binary", window=60.0, include_state=False, max_future=None))
    out: list[dict[str, Any]] = []
    for line in lines:
        pipeline.process(line)
        out += pipeline.poll()
    out += pipeline.flush()
    pipeline.close()
    return out


def rules_for(kind: str) -> dict[str, str]:
    metric, op, static, ph = WATCH[kind]
    far = "high" if op == "<" else "low"
    seq = "drop" if op == "<" else "rise"
    return {"static": f"{metric}{op}{static}", "interval": f"{metric}.{far}{op}{static}",
            "band": f"{metric}{op}band(3)", "sequential": f"{metric}.{seq}>{ph}"}


def first_firings(engine: AlertEngine, snaps: list[dict[str, Any]]) -> dict[str, list[int]]:
    """Window index of every firing event, per rule text."""
    fired: dict[str, list[int]] = {r.text: [] for r in engine.rules}
    for snap in snaps:
        for event in engine.observe(snap):
            if event["state"] == "firing":
                fired[event["rule"]].append(int(event["window"]["start"] // 60))
    return fired


def river_firings(series: list[float | None], direction: str, threshold: float) -> dict[str, list[int]]:
    try:
        from river import drift
    except ImportError:
        return {}
    out: dict[str, list[int]] = {}
    for name, det in (("river ADWIN", drift.ADWIN()),
                      ("river PageHinkley", drift.PageHinkley(min_instances=5, threshold=threshold,
                                                       mode="down" if direction == "<" else "up"))):
        hits = []
        for i, v in enumerate(series):
            if v is None or not math.isfinite(v):
                continue
            det.update(v)
            if det.drift_detected:
                hits.append(i)
        out[name] = hits
    return out


def summarise(hits: list[int], windows: int, change: int | None) -> tuple[float, int | None]:
    """(false alarms per 1,000 windows, delay in windows or None)."""
    if change is None:
        return 1000 * len(hits) / windows, None
    false = [h for h in hits if h < change]
    after = [h for h in hits if h >= change]
    return 1000 * len(false) / change, (after[0] - change) if after else None


def measure(windows: int, events: int, seed: int, echo: bool = True) -> dict[str, Any]:
    """Run every stream; return ``{"results": {stream: {method: (false alarms/1000, delay)}},
    "has_intervals": bool}`` and print the tables when ``echo``."""
    t0 = time.process_time()
    reference = snapshots(stream_lines("no_change", max(50, windows // 4), events, seed + 100))
    results: dict[str, dict[str, tuple[float, int | None]]] = {}
    has_intervals = True
    for i, kind in enumerate(STREAMS):
        snaps = snapshots(stream_lines(kind, windows, events, seed + i))
        has_intervals = has_intervals and any("intervals" in s for s in snaps)
        rules = rules_for(kind)
        parsed = parse_rules(rules.values())
        engine = AlertEngine(parsed, bands=reference_bands(reference, parsed))
        fired = first_firings(engine, snaps)
        metric, op, _, ph = WATCH[kind]
        series = [s["metrics"].get(metric) for s in snaps]
        quality_change = kind in ("auc_drop", "calibration_drift")
        change = windows // 2 if quality_change else None
        rows = {method: summarise(fired[text], windows, change) for method, text in rules.items()}
        rows.update({name: summarise(h, windows, change) for name, h in river_firings(series, op, ph).items()})
        results[kind] = rows
        if echo:
            print(f"\n{kind} ({windows} windows of {events} events; watched: {metric}"
                  f"{'; change at window ' + str(windows // 2) if quality_change else ''})")
            print(f"  {'method':<18} {'rule':<26} {'false alarms/1000 windows':>26} {'delay (windows)':>16}")
            for method, (fa, delay) in rows.items():
                print(f"  {method:<18} {rules.get(method, ''):<26} {fa:>26.1f} "
                      f"{'-' if change is None else ('not detected' if delay is None else str(delay)):>16}")
    if echo:
        print(f"\nCPU {time.process_time() - t0:.1f} s")
        if not has_intervals:
            print("note: snapshots carry no intervals: the interval method never fires")
    return {"results": results, "has_intervals": has_intervals}


def targets(quick: bool) -> list:
    """``python -m benchmarks``' rows (met/MISSED): each robust method's false alarms on the
    unchanged stream at most static's; the interval rule's false alarms on the prevalence shift
    at most 0; on each change stream, the earliest detection among the robust methods that raise
    no more false alarms than static, at most static's delay (in windows)."""
    from _targets import Target

    out = measure(200 if quick else 1000, 400, 11, echo=False)
    res = out["results"]
    base = res["no_change"]
    rows = [Target("bench_alerts", f"{m}: false alarms per 1000 windows, no change (static's as target)",
                   base["static"][0], base[m][0], at_most=True, note=f"static {base['static'][0]:.1f}")
            for m in ("interval", "band", "sequential")]
    shifted = res["prevalence_shift"]["interval"][0] if out["has_intervals"] else math.nan
    rows.append(Target("bench_alerts", "interval: false alarms per 1000 windows, prevalence shift only", 0.0,
                       shifted, at_most=True))
    for kind in ("auc_drop", "calibration_drift"):
        static_fa, static_delay = res[kind]["static"]
        delays = [res[kind][m][1] for m in ("interval", "band", "sequential")
                  if res[kind][m][1] is not None and res[kind][m][0] <= static_fa]
        best = float(min(delays)) if delays else math.inf
        rows.append(Target("bench_alerts", f"{kind}: earliest robust detection, windows (static's delay as target)",
                           math.inf if static_delay is None else float(static_delay), best, at_most=True,
                           note=f"static {static_delay}"))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--windows", type=int, default=1000)
    ap.add_argument("--events", type=int, default=400, help="predictions per window")
    ap.add_argument("--quick", action="store_true", help="200 windows per stream")
    ap.add_argument("--seed", type=int, default=11)
    args = ap.parse_args(argv)
    out = measure(200 if args.quick else args.windows, args.events, args.seed)
    results, has_intervals = out["results"], out["has_intervals"]
    checks = []
    base = results["no_change"]
    for method in ("interval", "band", "sequential"):
        checks.append((f"{method}: fewer false alarms than static on no_change "
                       f"({base[method][0]:.1f} vs {base['static'][0]:.1f} per 1000)",
                       base[method][0] < base["static"][0] or base["static"][0] == 0 == base[method][0]))
    shifted = results["prevalence_shift"]["interval"][0]
    checks.append((f"interval: no alarm on prevalence_shift ({shifted:.1f} per 1000)", has_intervals and shifted == 0))
    for kind in ("auc_drop", "calibration_drift"):
        static = results[kind]["static"][1]
        better = [m for m in ("interval", "band", "sequential") if results[kind][m][1] is not None
                  and (static is None or results[kind][m][1] <= static)
                  and results[kind][m][0] <= results[kind]["static"][0]]
        checks.append((f"{kind}: a method with no more false alarms than static detects no later "
                       f"({', '.join(better) or 'none'})", bool(better)))
    print()
    for text, ok in checks:
        print(f"{'met' if ok else 'MISSED':>6}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
