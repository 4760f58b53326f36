"""``streammetrics replay`` over the same events as JSONL, CSV and Parquet, and
``sm.replay_frame`` over them as a pandas DataFrame: CPU time per run and its ratio to JSONL.

    python benchmarks/bench_inputs.py [--events 200000] [--rounds 3] [--quick]

The events are binary predictions on three keys (60 s tumbling windows, ~10 events/s of event
time), written once per format (floats as their shortest repr, so every format holds the same
numbers); each round replays every input in turn (interleaved, in this process) and the best
CPU time of the rounds counts (``time.process_time``: on a shared machine the wall clock mostly
measures waiting for a core). Every run's snapshots are checked byte-identical to JSONL's. The
``ms`` row is JSONL with epoch milliseconds (``--ts-unit ms``: decoded, rescaled, then parsed);
``frame`` times ``replay_frame`` on a DataFrame already in memory, ``parquet->frame`` includes
``pandas.read_parquet``.
"""
from __future__ import annotations

import argparse
import csv
import hashlib
import json
import os
import random
import sys
import tempfile
import time

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

import streammetrics as sm
from streammetrics.cli import main

T0 = 1_700_000_000


def events(n: int, seed: int = 1) -> list[dict]:
    rng = random.Random(seed)
    return [{"ts": round(T0 + i / 10 + rng.random() / 20, 3), "model": "m", "segment": rng.choice("abc"),
             "y_true": rng.randint(0, 1), "score": rng.random()} for i in range(n)]


def write_all(rows: list[dict], where: str) -> dict[str, tuple[str, list[str]]]:
    paths = {}
    p = os.path.join(where, "e.jsonl")
    with open(p, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in rows)
    paths["jsonl"] = (p, [])
    p = os.path.join(where, "e.csv")
    with open(p, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(list(rows[0]))
        w.writerows([repr(v) if isinstance(v, float) else v for v in r.values()] for r in rows)
    paths["csv"] = (p, [])
    p = os.path.join(where, "e.parquet")
    pq.write_table(pa.Table.from_pylist(rows), p)
    paths["parquet"] = (p, [])
    p = os.path.join(where, "ms.jsonl")
    with open(p, "w") as f:
        f.writelines(json.dumps(dict(r, ts=round(r["ts"] * 1000))) + "\n" for r in rows)
    paths["jsonl ms"] = (p, ["--ts-unit", "ms"])
    return paths


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_cli(path: str, flags: list[str], out: str) -> tuple[float, str]:
    t = time.process_time()
    code = main(["replay", path, "-o", out, "-q", *flags])
    cpu = time.process_time() - t
    assert code == 0, path
    with open(out) as f:
        return cpu, digest(f.read())


def main_bench() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="20,000 events, one round (a smoke run)")
    args = ap.parse_args()
    n, rounds = (20_000, 1) if args.quick else (args.events, args.rounds)
    rows = events(n)
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as where:
        paths = write_all(rows, where)
        out = os.path.join(where, "out.jsonl")
        frame = pd.DataFrame(rows)
        want = None
        stderr = sys.stderr
        for _ in range(rounds):
            for name, (path, flags) in paths.items():
                sys.stderr = open(os.devnull, "w")  # noqa: SIM115 - the replay summary line
                try:
                    cpu, got = run_cli(path, flags, out)
                finally:
                    sys.stderr.close()
                    sys.stderr = stderr
                want = want or got
                assert got == want, f"{name}: snapshots differ from JSONL's"
                best[name] = min(best.get(name, float("inf")), cpu)
            t = time.process_time()
            lines = sm.replay_frame(frame)["snapshot"]
            best["frame"] = min(best.get("frame", float("inf")), time.process_time() - t)
            assert digest("".join(line + "\n" for line in lines)) == want, "frame: snapshots differ"
            t = time.process_time()
            sm.replay_frame(pd.read_parquet(paths["parquet"][0]))
            best["parquet->frame"] = min(best.get("parquet->frame", float("inf")), time.process_time() - t)
    base = best["jsonl"]
    print(f"{n:,} events, best of {rounds} round(s), CPU seconds; snapshots identical to JSONL's ({want})")
    print(f"{'input':<16}{'cpu s':>8}{'events/cpu-s':>14}{'ratio to jsonl':>16}")
    for name, cpu in best.items():
        print(f"{name:<16}{cpu:>8.3f}{n / cpu:>14,.0f}{cpu / base:>16.2f}")


if __name__ == "__main__":
    main_bench()
