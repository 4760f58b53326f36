"""Is ``replay``'s output byte-identical to a previous revision's? (issue 24, point 4)

Builds a deterministic corpus of event streams - every task (binary, multiclass, labels,
regression), weights, hopping windows with grace, delayed labels (``--labels``), ``--reference``,
``--no-state``, ``--cumulative``, many keys, and hostile values (scores exactly 0 and 1, -0.0 and
margins, zero / fractional / huge weights, odd keys, ISO and millisecond times, out-of-order,
late and far-future events, arrays of events per line, malformed lines) - then runs ``replay``
of the current tree and of ``REV`` (extracted with ``git archive``) over every stream and
compares, byte for byte, the snapshots written, the rejected-lines report on stderr and the exit
status. Prints one line per stream (``identical`` / ``DIFFERENT``) and exits 1 on any
difference.

    python benchmarks/compare_replay.py                 # against main's merge-base (or HEAD~)
    python benchmarks/compare_replay.py --base main     # against any revision
    python benchmarks/compare_replay.py --events 20000 --keep DIR   # larger streams, keep outputs

Each tree runs in its own Python process (``PYTHONPATH`` = the tree), every stream in turn
through ``streammetrics.cli.main``. The corpus depends only on ``--events`` and ``--seed``.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import json
import math
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
T0 = 1_700_000_000  # 2023-11-14: far behind any wall clock (--max-future stays out of the way)
CLASSES = ["a", "b", "c", "d", "e"]
ODD_MODELS = ["m|pipe", "ünï©ødé", "", " spaced ", "x" * 300, "m\"quote", "m\\back", "0", "null"]


# ----------------------------------------------------------------------------- corpus
def _dump(rows: list[Any]) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r, allow_nan=True)) + "\n" for r in rows)


def _shuffle_some(rng: random.Random, rows: list[Any], share: float) -> None:
    """Swap a share of neighbouring rows (out-of-order events within a few seconds)."""
    for i in range(len(rows) - 1):
        if rng.random() < share:
            rows[i], rows[i + 1] = rows[i + 1], rows[i]


def _late(rng: random.Random, rows: list[dict], n: int, behind: float) -> None:
    """Append copies of random events moved ``behind`` seconds back (late events)."""
    for _ in range(n):
        e = dict(rng.choice(rows))
        if isinstance(e["ts"], str):
            continue
        e["ts"] = e["ts"] - behind
        rows.insert(rng.randrange(len(rows) // 2, len(rows)), e)


def _binary(rng: random.Random, n: int, keys: list[tuple[str, str | None]], span: float = 600.0,
            score: Callable[[random.Random, int], float] | None = None) -> list[dict]:
    rows = []
    for i in range(n):
        model, segment = keys[i % len(keys)]
        y = 1 if rng.random() < 0.35 else 0
        s = score(rng, y) if score else 1.0 / (1.0 + math.exp(-(1.2 if y else -1.2) - rng.gauss(0.0, 1.5)))
        e: dict[str, Any] = {"ts": T0 + span * i / n, "model": model, "y_true": y, "score": s}
        if segment is not None:
            e["segment"] = segment
        rows.append(e)
    return rows


def _hostile_score(rng: random.Random, y: int) -> float:
    r = rng.random()
    if r < 0.08:
        return 0.0
    if r < 0.16:
        return 1.0
    if r < 0.19:
        return -0.0
    if r < 0.22:
        return 1.0 - 2.0 ** -53
    if r < 0.25:
        return 5e-324
    if r < 0.28:
        return rng.choice([0.5, 0.25, 0.75])
    return rng.random()


def build_corpus(directory: Path, events: int, seed: int) -> list[dict[str, Any]]:
    """Write the corpus into ``directory``; return the manifest: one ``{"name", "args"}`` per
    stream (``args`` of ``replay``, file names relative to ``directory``)."""
    rng = random.Random(seed)
    n = max(events, 50)
    streams: list[dict[str, Any]] = []

    def add(name: str, files: dict[str, list[Any]], args: list[str]) -> None:
        for fname, rows in files.items():
            (directory / fname).write_text(_dump(rows), encoding="utf-8")
        streams.append({"name": name, "args": args})

    keys4 = [("m1", "s1"), ("m1", "s2"), ("m2", None), ("m2", "s1")]
    base = _binary(rng, n, keys4)
    add("binary", {"binary.jsonl": base}, ["binary.jsonl", "--window", "60s"])
    add("binary-no-state", {}, ["binary.jsonl", "--window", "60s", "--no-state"])
    add("binary-cumulative", {}, ["binary.jsonl", "--window", "120s", "--cumulative", "--threshold", "0.3"])

    hop = _binary(rng, n, keys4)
    _shuffle_some(rng, hop, 0.2)
    _late(rng, hop, max(n // 50, 3), 45.0)
    add("binary-hopping", {"hopping.jsonl": hop},
        ["hopping.jsonl", "--window", "60s", "--slide", "20s", "--grace", "10s"])

    weighted = _binary(rng, n, keys4)
    for e in weighted:
        r = rng.random()
        e["weight"] = (0.0 if r < 0.1 else 2.5 if r < 0.2 else 1e12 if r < 0.23 else 1e200 if r < 0.24
                       else 5e-324 if r < 0.25 else float(rng.randint(1, 4)) if r < 0.6 else 1.0)
    add("binary-weights", {"weights.jsonl": weighted}, ["weights.jsonl", "--window", "60s"])

    odd_keys = [(m, s) for m in ODD_MODELS for s in (None, "s", "é|x")][: max(4, n // 20)]
    hostile: list[Any] = _binary(rng, n, odd_keys, score=_hostile_score)
    for e in hostile[::17]:
        e["score"] = rng.choice([3.5, -2.0, 1e300, -1e-300])  # margins: log loss undefined from then on
    for i, e in enumerate(hostile[::13]):
        e["ts"] = ["2023-11-14T22:13:20Z", "2023-11-14T22:14:00.5+00:00", T0 + 30][i % 3]
    _shuffle_some(rng, hostile, 0.3)
    _late(rng, hostile, max(n // 40, 3), 300.0)
    bad = ['{"ts": 1, "model": "m", "y_true": 1}', "not json", '{"ts": "yesterday", "model": "m", "y_true": 1, '
           '"score": 0.5}', '{"ts": 1700000001, "model": "m", "y_true": 2, "score": 0.5}',
           '{"ts": 1700000001, "model": "m", "y_true": 1, "score": NaN}',
           '{"ts": 1700000001, "model": "m", "y_true": 1, "score": "0.5"}',
           '{"ts": 1700000001, "model": "m", "y_true": true, "score": 0.5, "weight": -1}',
           '{"ts": 1700000001, "model": ["m"], "y_true": 1, "score": 0.5}',
           '{"ts": 1700000001, "model": "m", "y_true": 1, "score": 0.5, "weight": Infinity}',
           '{"ts": 253402300000, "model": "m", "y_true": 1, "score": 0.5}', "[]", "",
           json.dumps([{"ts": T0 + 5, "model": "arr", "y_true": 1, "score": 0.9},
                       {"ts": T0 + 6, "model": "arr", "y_true": 0, "score": 0.1}]),
           '{"ts": 1700000002, "model": "m", "y_true": 1.0, "score": 1}']
    for line in bad:
        hostile.insert(rng.randrange(len(hostile)), line)
    add("binary-hostile", {"hostile.jsonl": hostile}, ["hostile.jsonl", "--window", "60s", "--grace", "5s"])
    add("binary-hostile-no-state", {}, ["hostile.jsonl", "--window", "30s", "--no-state"])

    ms = [{**e, "ts": int(round(e["ts"] * 1000))} for e in _binary(rng, n, keys4)]
    add("binary-ts-ms", {"ms.jsonl": ms}, ["ms.jsonl", "--window", "60s", "--ts-unit", "ms"])

    many = _binary(rng, n, [(f"model-{i % 37}", f"seg-{i}") for i in range(300)], span=300.0)
    add("binary-many-keys", {"many.jsonl": many}, ["many.jsonl", "--window", "60s"])
    add("binary-max-keys", {}, ["many.jsonl", "--window", "60s", "--max-keys", "25"])
    add("binary-idle-close", {}, ["many.jsonl", "--window", "30s", "--idle-close", "40s"])
    many_ref = _binary(rng, max(n // 2, 50), [(f"model-{i % 37}", f"seg-{i}") for i in range(0, 300, 7)], span=300.0)
    add("binary-many-keys-reference", {"many_ref.jsonl": many_ref},
        ["many.jsonl", "--window", "60s", "--reference", "many_ref.jsonl"])
    add("binary-many-keys-no-state", {}, ["many.jsonl", "--window", "60s", "--no-state"])

    preds, labels = [], []
    for i, e in enumerate(_binary(rng, n, keys4)):
        pid = f"p{i}"
        y = e.pop("y_true")
        preds.append({**e, "id": pid})
        r = rng.random()
        if r < 0.8:
            labels.append({"id": pid, "y_true": y, "ts": e["ts"] + rng.uniform(0.0, 120.0)})
        elif r < 0.85:  # a label before its prediction
            labels.append({"id": pid, "y_true": y, "ts": e["ts"] - 5.0})
        elif r < 0.88:  # a duplicate label
            labels += [{"id": pid, "y_true": y, "ts": e["ts"] + 1.0}, {"id": pid, "y_true": 1 - y, "ts": e["ts"] + 2.0}]
        # else: never labelled
    labels.append({"id": "nobody", "y_true": 1, "ts": T0 + 10})
    labels.sort(key=lambda x: x["ts"])
    add("binary-delayed-labels", {"preds.jsonl": preds, "labels.jsonl": labels},
        ["preds.jsonl", "--labels", "labels.jsonl", "--window", "60s", "--label-ttl", "10m"])

    # delayed labels on hostile values (margins, weights of 1e300 and 0; ~190 predictions per key
    # and window): numpy's warnings on stderr, where and how often, are part of the output too
    hrng = random.Random(seed + 1)  # (its own: the streams after it stay as they were)
    preds, labels = [], []
    for i in range(n):
        ts = round(T0 + 600.0 * i / n, 3)
        p: dict[str, Any] = {"ts": ts, "model": f"h{i % 2}", "id": f"h{i}",
                             "score": hrng.choice([0.5, 0.25, 1e308, -1e308, 1e200, 0.0, 1.0, -0.0, 5e-324])}
        if hrng.random() < 0.2:
            p["weight"] = hrng.choice([1e300, 0.5, 2.0, 0.0])
        preds.append(p)
        if hrng.random() < 0.9:
            labels.append({"id": f"h{i}", "y_true": hrng.randrange(2), "ts": round(ts + hrng.uniform(0.0, 90.0), 3)})
    labels.sort(key=lambda x: x["ts"])
    add("binary-delayed-hostile", {"hpreds.jsonl": preds, "hlabels.jsonl": labels},
        ["hpreds.jsonl", "--labels", "hlabels.jsonl", "--window", "60s"])

    ref = _binary(rng, max(n // 2, 50), keys4[:3])
    add("binary-reference", {"reference.jsonl": ref}, ["binary.jsonl", "--window", "60s", "--reference",
                                                        "reference.jsonl"])
    add("binary-reference-hopping", {}, ["hopping.jsonl", "--window", "60s", "--slide", "30s", "--reference",
                                         "reference.jsonl", "--no-state"])

    multi: list[Any] = []
    for i in range(n):
        y = rng.randrange(5)
        raw = [rng.random() + (1.5 if k == y else 0.0) for k in range(5)]
        total = sum(raw)
        probs = [x / total for x in raw]
        e: dict[str, Any] = {"ts": T0 + 600.0 * i / n, "model": f"mc{i % 3}", "y_true": CLASSES[y]}
        e["scores"] = probs if i % 2 else dict(zip(CLASSES, probs))
        if i % 7 == 0:
            e["weight"] = rng.choice([0.0, 0.5, 3.0])
        if i % 29 == 0:
            e["scores"] = [1.0, 0.0, 0.0, 0.0, 0.0]
        multi.append(e)
    _shuffle_some(rng, multi, 0.1)
    multi.insert(len(multi) // 2, '{"ts": 1700000001, "model": "mc0", "y_true": "z", "scores": [1, 0, 0, 0, 0]}')
    add("multiclass", {"multi.jsonl": multi}, ["multi.jsonl", "--task", "multiclass", "--classes", ",".join(CLASSES),
                                               "--window", "60s"])
    add("multiclass-reference", {"multi_ref.jsonl": multi[: n // 2]},
        ["multi.jsonl", "--task", "multiclass", "--classes", ",".join(CLASSES), "--window", "120s",
         "--reference", "multi_ref.jsonl"])

    lab = []
    for i in range(n):
        y = rng.choice(["cat", "dog", "bird"]) if i % 5 else rng.randrange(3)
        p = y if rng.random() < 0.7 else rng.choice(["cat", "dog", "bird", 0, 1, 2])
        e = {"ts": T0 + 600.0 * i / n, "model": f"lab{i % 2}", "y_true": y, "y_pred": p}
        if i % 11 == 0:
            e["weight"] = rng.choice([0.0, 2.0, 0.25])
        lab.append(e)
    add("labels", {"labels_task.jsonl": lab}, ["labels_task.jsonl", "--task", "labels", "--window", "60s"])
    add("labels-label-set", {}, ["labels_task.jsonl", "--task", "labels", "--window", "60s", "--label-set",
                                 "cat,dog,bird"])

    reg = []
    for i in range(n):
        t = rng.gauss(10.0, 5.0)
        e = {"ts": T0 + 600.0 * i / n, "model": f"reg{i % 3}", "y_true": t, "y_pred": t + rng.gauss(0.0, 2.0)}
        if i % 31 == 0:
            e["y_true"] = 0.0
        if i % 37 == 0:
            e["y_pred"] = -1e300
        if i % 9 == 0:
            e["weight"] = rng.choice([0.0, 1.5, 1e9])
        reg.append(e)
    _shuffle_some(rng, reg, 0.1)
    add("regression", {"regression.jsonl": reg}, ["regression.jsonl", "--task", "regression", "--window", "60s",
                                                  "--slide", "30s"])

    # delayed labels of the labels task with few labels allowed (--max-labels 2 of 8 seen): the
    # folding depends on the order updates arrive in, which the engine must keep
    lrng = random.Random(seed + 2)  # (its own: the streams before it stay as they were)
    names = [f"c{k}" for k in range(8)]
    preds, labels = [], []
    for i in range(n):
        ts = round(T0 + 600.0 * i / n, 3)
        preds.append({"ts": ts, "model": f"ml{i % 2}", "id": f"l{i}", "y_pred": lrng.choice(names)})
        if lrng.random() < 0.9:
            labels.append({"id": f"l{i}", "y_true": lrng.choice(names), "ts": round(ts + lrng.uniform(0.0, 90.0), 3)})
    labels.sort(key=lambda x: x["ts"])
    add("labels-delayed-max-labels", {"lpreds.jsonl": preds, "llabels.jsonl": labels},
        ["lpreds.jsonl", "--labels", "llabels.jsonl", "--task", "labels", "--max-labels", "2", "--window", "60s",
         "--slide", "30s"])
    (directory / "manifest.json").write_text(json.dumps(streams, indent=1), encoding="utf-8")
    return streams


# ----------------------------------------------------------------------------- running
def run_corpus(corpus: Path, out: Path) -> None:
    """Run every stream of ``corpus`` with the ``streammetrics`` on ``sys.path`` (this process's
    tree): ``out/NAME.out`` (snapshots), ``NAME.err`` (stderr), ``NAME.rc`` (exit status)."""
    import streammetrics
    from streammetrics.cli import main

    tree = str(Path(streammetrics.__file__).resolve().parent.parent)
    streams = json.loads((corpus / "manifest.json").read_text(encoding="utf-8"))
    os.chdir(corpus)
    for stream in streams:
        name = stream["name"]
        err = io.StringIO()
        target = out / f"{name}.out"
        # warnings are compared by category and message (not by the source line that raised
        # them), each once per stream
        with contextlib.redirect_stderr(err), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                rc = main(["replay", *stream["args"], "--output", str(target), "--progress", "off"])
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except Exception as exc:  # a crash is an outcome to compare too
                print(f"crash: {type(exc).__name__}: {exc}", file=err)
                rc = -1
        seen = dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught)
        err.write("".join(f"warning: {w}\n" for w in seen))
        if not target.exists():
            target.write_bytes(b"")
        (out / f"{name}.err").write_text(err.getvalue().replace(tree, "<tree>"), encoding="utf-8")
        (out / f"{name}.rc").write_text(str(rc), encoding="utf-8")


def run_tree(tree: Path, corpus: Path, out: Path) -> None:
    """:func:`run_corpus` in a fresh Python process whose ``streammetrics`` is ``tree``'s."""
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
    subprocess.run([sys.executable, str(Path(__file__).resolve()), "--run-corpus", str(corpus), str(out)],
                   env=env, check=True, cwd=str(tree))


def compare(base: Path, new: Path, streams: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """``(name, "identical" | "DIFFERENT (...)")`` per stream."""
    results = []
    for stream in streams:
        name = stream["name"]
        diffs = [part for part, ext in (("snapshots", "out"), ("stderr", "err"), ("exit status", "rc"))
                 if (base / f"{name}.{ext}").read_bytes() != (new / f"{name}.{ext}").read_bytes()]
        if diffs and "snapshots" in diffs:
            a, b = (base / f"{name}.out").read_bytes().splitlines(), (new / f"{name}.out").read_bytes().splitlines()
            first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            diffs[0] = f"snapshots from line {first + 1}; {len(a)} vs {len(b)} lines"
        results.append((name, "identical" if not diffs else f"DIFFERENT ({', '.join(diffs)})"))
    return results


def summarize(results: list[tuple[str, str]]) -> int:
    """Print one line per stream and the totals; the exit status (1 on any difference)."""
    for name, status in results:
        print(f"{name:28s} {status}")
    different = sum(status != "identical" for _, status in results)
    print(f"{len(results) - different} identical, {different} DIFFERENT")
    return 1 if different else 0


def default_base() -> str:
    """main's merge-base with HEAD, or HEAD~ when HEAD is on main."""
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "HEAD")
    try:
        base = git("merge-base", "HEAD", "main")
    except subprocess.CalledProcessError:
        base = head
    return base if base != head else git("rev-parse", "HEAD~")


def extract(rev: str, into: Path) -> Path:
    """``git archive`` of ``rev``'s ``streammetrics/`` into ``into``; return the tree."""
    data = subprocess.run(["git", "archive", "--format=tar", rev, "streammetrics"], cwd=ROOT, check=True,
                          capture_output=True).stdout
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(into, filter="data")
    return into


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", help="revision to compare with (default: main's merge-base with HEAD, or HEAD~)")
    ap.add_argument("--events", type=int, default=3000, help="events per stream (default 3000)")
    ap.add_argument("--seed", type=int, default=24)
    ap.add_argument("--keep", metavar="DIR", help="write the corpus and both outputs here (kept)")
    ap.add_argument("--run-corpus", nargs=2, metavar=("CORPUS", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.run_corpus:
        run_corpus(Path(args.run_corpus[0]), Path(args.run_corpus[1]))
        return 0
    rev = args.base or default_base()
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="compare-replay-"))
    try:
        work.mkdir(parents=True, exist_ok=True)
        corpus = work / "corpus"
        corpus.mkdir(exist_ok=True)
        streams = build_corpus(corpus, args.events, args.seed)
        base_tree = extract(rev, work / "base-tree")
        run_tree(base_tree, corpus, work / "base")
        run_tree(ROOT, corpus, work / "current")
        results = compare(work / "base", work / "current", streams)
        print(f"replay of the current tree vs {rev[:12]}, {len(streams)} streams of ~{args.events} events")
        return summarize(results)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
