"""Is sliced ``replay`` output byte-identical to a previous revision's? (issue 28 beside issue 24, point 4)

The companion of ``compare_replay.py`` for ``--slice-by``: a deterministic corpus of sliced
streams - three dimensions (Zipf-skewed values, so keys come, go quiet, are evicted and return),
roll-ups, the per-window budget (``--max-slice-values`` small enough to fold), fairness, worst
slices, weights, hopping windows with grace, ``--cumulative``, ``--no-state``, a ``--max-keys``
small enough to refuse and forget keys, and hostile values (numbers, booleans, null and absent
values, ``|``, very long and non-ASCII values, lists, scores 0 and 1, late and out-of-order
events, malformed lines) - replayed by the current tree and by ``REV``, compared byte for byte
(snapshots, stderr, exit status) with ``compare_replay``'s runner.

    python benchmarks/compare_slices.py --base main [--events 6000] [--keep DIR]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import compare_replay as cr  # noqa: E402  (benchmarks/ is on sys.path)

HOSTILE = ["", None, 7, 2.5, True, False, "a|b", "x" * 1200, "ünï©ødé", "q\"uote", [1], {"k": 1}, "__other__"]


def _zipf(rng: random.Random, k: int) -> int:
    weights = [1.0 / (i + 1) ** 1.1 for i in range(k)]
    return rng.choices(range(k), weights)[0]


def build_corpus(directory: Path, n: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    rows: list[Any] = []
    for i in range(n):
        e: dict[str, Any] = {"ts": cr.T0 + 900.0 * i / n, "model": f"m{i % 2}", "a": f"a{_zipf(rng, 10)}",
                             "b": f"b{_zipf(rng, 20)}", "c": f"c{_zipf(rng, 50)}", "y_true": rng.randrange(2),
                             "score": round(rng.random(), 4)}
        if i % 13 == 0:
            e["segment"] = rng.choice(["s1", "s2"])
        if i % 17 == 0:
            e["weight"] = rng.choice([0.0, 0.5, 3.0])
        if i % 23 == 0:
            e["score"] = rng.choice([0.0, 1.0])
        if i % 41 == 0:
            e[rng.choice("abc")] = rng.choice(HOSTILE)
        if i % 53 == 0:
            del e[rng.choice("abc")]
        rows.append(e)
    cr._shuffle_some(rng, rows, 0.05)
    for _ in range(n // 100):  # late copies
        e = dict(rng.choice(rows))
        e["ts"] = e["ts"] - 200.0
        rows.insert(rng.randrange(len(rows)), e)
    for j in range(0, len(rows), max(1, n // 7)):  # a quiet stretch of one slice, then its return
        rows.insert(j, {"ts": cr.T0 + 900.0 * j / len(rows), "model": "m0", "a": "rare", "b": "b0", "c": "c0",
                        "y_true": 1, "score": 0.5})
    rows.insert(len(rows) // 3, '{"ts": 1700000100, "model": "m0", "a": "a1"')  # malformed
    rows.insert(len(rows) // 2, {"ts": "2023-11-14T22:20:00Z", "model": "m1", "a": "a1", "b": "b1", "c": "c1",
                                 "y_true": 0, "score": 0.25})
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "sliced.jsonl").write_text(cr._dump(rows), encoding="utf-8")
    dims = ["--slice-by", "a,b,c"]
    streams = [
        {"name": "sliced", "args": ["sliced.jsonl", "--window", "60s", *dims]},
        {"name": "sliced-rollups", "args": ["sliced.jsonl", "--window", "60s", *dims, "--rollup", "a",
                                            "--rollup", "model"]},
        {"name": "sliced-budget", "args": ["sliced.jsonl", "--window", "60s", *dims, "--max-slice-values", "3",
                                           "--rollup", "a,b", "--rollup", "model", "--fairness-by", "a"]},
        {"name": "sliced-hopping", "args": ["sliced.jsonl", "--window", "60s", "--slide", "20s", "--grace", "5s",
                                            *dims, "--rollup", "model"]},
        {"name": "sliced-cumulative", "args": ["sliced.jsonl", "--window", "60s", "--cumulative", *dims]},
        {"name": "sliced-no-state", "args": ["sliced.jsonl", "--window", "30s", "--no-state", *dims, "--rollup", "b",
                                             "--worst-slices", "3"]},
        {"name": "sliced-max-keys", "args": ["sliced.jsonl", "--window", "60s", *dims, "--max-keys", "150",
                                             "--rollup", "model"]},
        {"name": "sliced-max-keys-small", "args": ["sliced.jsonl", "--window", "60s", *dims, "--max-keys", "40"]},
    ]
    (directory / "manifest.json").write_text(json.dumps(streams, indent=1), encoding="utf-8")
    return streams


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", help="revision to compare with (default: main's merge-base with HEAD, or HEAD~)")
    ap.add_argument("--events", type=int, default=6000, help="events per stream (default 6000)")
    ap.add_argument("--seed", type=int, default=28)
    ap.add_argument("--keep", metavar="DIR", help="write the corpus and both outputs here (kept)")
    args = ap.parse_args(argv)
    base = args.base or cr.default_base()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        corpus = work / "corpus"
        streams = build_corpus(corpus, args.events, args.seed)
        old = cr.extract(base, work / "base")
        cr.run_tree(old, corpus, work / "out-base")
        cr.run_tree(cr.ROOT, corpus, work / "out-new")
        print(f"base {base}: {len(streams)} sliced streams of ~{args.events:,} events")
        return cr.summarize(cr.compare(work / "out-base", work / "out-new", streams))


if __name__ == "__main__":
    sys.exit(main())
