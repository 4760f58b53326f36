"""``streammetrics report`` wall time for 100 / 1,000 / 5,000 stream keys.

    python benchmarks/bench_report.py [--keys 100,1000,5000] [--windows 15] [--max-charts N]

The input imitates a fleet: a pool of 24 binary models with different drifts is replayed
(15 one-minute windows each, with monitor state, as ``replay`` writes them) and the pool's
snapshot lines are repeated under new model names until there are ``--keys`` keys, so every
key has ``--windows`` windows (about 2 KB per snapshot line). Each size runs the whole command
in-process (read, validate, alerts, summary table, charts, write) with two alert rules, and
prints the wall and CPU time (the CPU time is the steadier figure on a shared machine), the
number of charts drawn and the page size. The first size also pays for importing matplotlib. Key selection for charts
is :func:`streammetrics.report.select.choose_charted` (``--max-charts``, default
``streammetrics.report.DEFAULT_MAX_CHARTS``).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from typing import Iterator

from streammetrics import cli
from streammetrics.stream.synthetic import DriftingModel, generate_events, write_jsonl

POOL = 24
START = 1_767_225_600.0


def pool_models(n: int = POOL) -> tuple[DriftingModel, ...]:
    """``n`` models: some stable, some whose ranking decays, some whose calibration drifts."""
    models = []
    for i in range(n):
        sep_start = 2.5 + (i % 4) * 0.6
        sep_end = sep_start - (i % 3) * 1.0
        shift = (0.0, (i % 5 - 2) * 0.4)
        models.append(DriftingModel(f"pool-{i:02d}", "web" if i % 2 else "mobile", base_rate=0.15 + (i % 6) * 0.05,
                                    separation=(sep_start, sep_end), shift=shift))
    return tuple(models)


def pool_snapshots(tmp: str, windows: int = 15) -> list[tuple[dict, str]]:
    """(key, JSON line) of every snapshot of the replayed pool (about 100 events per window and key)."""
    events, snaps = os.path.join(tmp, "pool-events.jsonl"), os.path.join(tmp, "pool.jsonl")
    write_jsonl(events, generate_events(POOL * windows * 100, start=START, duration=windows * 60.0,
                                        models=pool_models()))
    assert cli.main(["replay", events, "-q", "-o", snaps]) == 0
    with open(snaps, encoding="utf-8") as fh:
        return [(json.loads(line)["key"], line) for line in fh if line.strip()]


def fleet_lines(pool: list[tuple[dict, str]], keys: int) -> Iterator[str]:
    """The pool's lines renamed so that there are ``keys`` distinct keys."""
    names = sorted({(k["model"], k["segment"]) for k, _ in pool})
    for copy in range((keys + len(names) - 1) // len(names)):
        wanted = {name for i, name in enumerate(names) if copy * len(names) + i < keys}
        for key, line in pool:
            if (key["model"], key["segment"]) in wanted:
                old = json.dumps({"model": key["model"], "segment": key["segment"]}, separators=(",", ":"))
                new = json.dumps({"model": f"{key['model']}-c{copy:04d}", "segment": key["segment"]},
                                 separators=(",", ":"))
                yield line.replace(old, new, 1)


def write_fleet(path: str, pool: list[tuple[dict, str]], keys: int) -> int:
    n = 0
    with open(path, "w", encoding="utf-8") as fh:
        for line in fleet_lines(pool, keys):
            fh.write(line if line.endswith("\n") else line + "\n")
            n += 1
    return n


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--keys", default="100,1000,5000", help="comma-separated key counts")
    ap.add_argument("--windows", type=int, default=15, help="windows per key (default 15)")
    ap.add_argument("--max-charts", type=int, default=None, help="passed to the report (default: its default)")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        pool = pool_snapshots(tmp, args.windows)
        print(f"pool: {len(pool)} snapshot lines of {POOL} keys")
        for keys in (int(k) for k in args.keys.split(",")):
            src, out = os.path.join(tmp, f"fleet-{keys}.jsonl"), os.path.join(tmp, f"report-{keys}.html")
            lines = write_fleet(src, pool, keys)
            extra = [] if args.max_charts is None else ["--max-charts", str(args.max_charts)]
            stdout = io.StringIO()
            t0, c0 = time.perf_counter(), time.process_time()
            real_stdout, sys.stdout = sys.stdout, stdout
            try:
                code = cli.main(["report", src, "-o", out, "--alert", "roc_auc<0.75", "--alert", "log_loss>0.6",
                                 *extra])
            finally:
                sys.stdout = real_stdout
            elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
            assert code == 0, f"report exited {code}"
            summary = stdout.getvalue().strip().split(": ", 1)[-1]
            print(f"{keys:>6} keys, {lines:>6} snapshots ({os.path.getsize(src) / 1e6:6.1f} MB): "
                  f"{elapsed:6.1f} s wall, {cpu:6.1f} s CPU, page {os.path.getsize(out) / 1e6:5.1f} MB; {summary}",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
