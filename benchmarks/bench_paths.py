"""What each ``replay`` path costs per event against the default binary path, in one run (issue 24).

Every path replays through ``streammetrics.cli.main(["replay", ...])`` exactly as the command
does (argument parsing, reading, windows, snapshots written to /dev/null), in this process; the
CPU time of this process (``time.process_time``) is taken per run, rounds interleave the paths
so that load from other processes hits all alike, and each figure is the best of ``--repeats``
rounds. Same number of events everywhere; 20 keys (``model`` x ``segment``), 60 s tumbling
windows, at two densities - ~1,000 events per key and window ("dense") and ~25 ("sparse": there
the cost per snapshot weighs most, and the default path's small-window form is fastest) - unless
a path says otherwise:

==========================  ==================================================  ============
path                        what changes                                        target
==========================  ==================================================  ============
``--no-state``              the same events, state left out of snapshots        <= 1.3x
``--reference`` (keys)      a reference for every key (events / 20 labelled)    <= 1.3x
``--reference`` (no key)    a reference whose keys match no event               <= 1.3x
hopping windows             ``--slide 20s`` (each event in 3 windows)           <= 1.3x
``--task labels``           hard labels (3 classes) instead of scores           <= 1.3x
regression                  ``--task regression``                               <= 1.3x
``--task multiclass`` K=5   a score array of 5 classes per event                <= 3x
delayed labels              predictions with ids + ``--labels`` (all labelled)  <= 2.5x
==========================  ==================================================  ============

(per prediction for delayed labels; per event for the others). Two more ratios:
``replay`` against a typed msgspec decode loop over the same lines (``msgspec.json.Decoder``
of a ``Struct`` of the event's fields, one ``decode`` per line): the decode loop's time over
replay's, target >= 0.2; and 10,000 keys against 1 key (the same events, ~10 per key and window,
as ``bench_keys.py``): the 10,000-key rate over the one-key rate, target >= 0.55.

    python benchmarks/bench_paths.py [--events 200000] [--repeats 3] [--quick]
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import math
import os
import random
import tempfile
import time
from pathlib import Path
from typing import Callable

from _targets import Target, print_targets  # (benchmarks/ is on sys.path)

from streammetrics.cli import main as cli_main

T0 = 1_700_000_000
CLASSES = ["a", "b", "c", "d", "e"]


def _write(path: Path, rows: list[dict]) -> None:
    with open(path, "w", encoding="utf-8") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")


def _keys(n: int) -> list[tuple[str, str]]:
    return [(f"m{i % 5}", f"s{i // 5}") for i in range(n)]


def _binary(rng: random.Random, n: int, keys: list[tuple[str, str]], span: float) -> list[dict]:
    rows = []
    for i in range(n):
        model, segment = keys[i % len(keys)]
        y = 1 if rng.random() < 0.3 else 0
        score = 1.0 / (1.0 + math.exp(-(1.0 if y else -1.0) - rng.gauss(0.0, 1.5)))
        rows.append({"ts": round(T0 + span * i / n, 3), "model": model, "segment": segment, "y_true": y,
                     "score": round(score, 6)})
    return rows


#: events per key and window of the two densities measured
DENSITIES = {"dense": 1000, "sparse": 25}
PATHS = ["default", "--no-state", "--reference (keys)", "--reference (no key)", "hopping (--slide 20s)",
         "--task labels", "--task regression", "--task multiclass K=5", "delayed labels"]


def build_files(directory: Path, events: int, per_window: int, seed: int = 24) -> dict[str, list[str]]:
    """Write the inputs of every path (20 keys, ``per_window`` events per key and 60 s window);
    return the replay arguments of every path (files in ``directory``)."""
    rng = random.Random(seed)
    keys = _keys(20)
    span = 60.0 * max(1.0, events / (20 * per_window))
    binary = _binary(rng, events, keys, span)
    _write(directory / "binary.jsonl", binary)
    ref_events = max(events // 20, 200)  # 20 keys x 500 at the full size
    _write(directory / "reference.jsonl", _binary(rng, ref_events, keys, span))
    _write(directory / "reference_other.jsonl", _binary(rng, ref_events, [(f"other{i}", "x") for i in range(20)], span))
    labels_task, regression, multiclass, predictions, labels = [], [], [], [], []
    for i, e in enumerate(binary):
        base = {"ts": e["ts"], "model": e["model"], "segment": e["segment"]}
        truth = rng.choice(["cat", "dog", "bird"])
        labels_task.append({**base, "y_true": truth,
                            "y_pred": truth if rng.random() < 0.7 else rng.choice(["cat", "dog", "bird"])})
        t = rng.gauss(10.0, 3.0)
        regression.append({**base, "y_true": round(t, 6), "y_pred": round(t + rng.gauss(0.0, 1.0), 6)})
        y = rng.randrange(5)
        raw = [rng.random() + (1.0 if k == y else 0.0) for k in range(5)]
        total = sum(raw)
        multiclass.append({**base, "y_true": CLASSES[y], "scores": [round(x / total, 6) for x in raw]})
        predictions.append({**base, "id": f"p{i}", "score": e["score"]})
        labels.append({"id": f"p{i}", "y_true": e["y_true"], "ts": round(e["ts"] + rng.uniform(0.0, 30.0), 3)})
    labels.sort(key=lambda r: r["ts"])
    _write(directory / "labels_task.jsonl", labels_task)
    _write(directory / "regression.jsonl", regression)
    _write(directory / "multiclass.jsonl", multiclass)
    _write(directory / "predictions.jsonl", predictions)
    _write(directory / "labels.jsonl", labels)
    d = str(directory)
    common = ["--window", "60s", "--output", os.devnull, "--quiet", "--progress", "off"]
    return {
        "default": [f"{d}/binary.jsonl", *common],
        "--no-state": [f"{d}/binary.jsonl", *common, "--no-state"],
        "--reference (keys)": [f"{d}/binary.jsonl", *common, "--reference", f"{d}/reference.jsonl"],
        "--reference (no key)": [f"{d}/binary.jsonl", *common, "--reference", f"{d}/reference_other.jsonl"],
        "hopping (--slide 20s)": [f"{d}/binary.jsonl", *common, "--slide", "20s"],
        "--task labels": [f"{d}/labels_task.jsonl", *common, "--task", "labels"],
        "--task regression": [f"{d}/regression.jsonl", *common, "--task", "regression"],
        "--task multiclass K=5": [f"{d}/multiclass.jsonl", *common, "--task", "multiclass", "--classes",
                                  ",".join(CLASSES)],
        "delayed labels": [f"{d}/predictions.jsonl", *common, "--labels", f"{d}/labels.jsonl"],
    }


def build_key_files(directory: Path, key_events: int, seed: int = 25) -> dict[str, list[str]]:
    """1 key vs 10,000 keys: the same events, ~10 per key and window (as bench_keys.py)."""
    rng = random.Random(seed)
    key_span = 60.0 * max(1, key_events // 100_000)
    _write(directory / "one_key.jsonl", _binary(rng, key_events, [("m", "s")], key_span))
    _write(directory / "many_keys.jsonl", _binary(rng, key_events, [(f"m{i:05d}", "s") for i in range(10_000)],
                                                  key_span))
    d = str(directory)
    common = ["--window", "60s", "--output", os.devnull, "--quiet", "--progress", "off"]
    return {"1 key": [f"{d}/one_key.jsonl", *common], "10,000 keys": [f"{d}/many_keys.jsonl", *common]}


def decode_loop(path: str) -> Callable[[], None]:
    """A typed msgspec decode of every line of a binary events file (the floor replay is held to)."""
    import msgspec

    class Event(msgspec.Struct):
        ts: float
        model: str
        y_true: int
        score: float
        segment: str = ""

    decode = msgspec.json.Decoder(Event).decode

    def run() -> None:
        with open(path, "rb") as fh:
            for line in fh:
                decode(line)

    return run


def _replay(args: list[str]) -> Callable[[], None]:
    def run() -> None:
        err = io.StringIO()
        with contextlib.redirect_stderr(err):  # (replay's summary line)
            rc = cli_main(["replay", *args])
        if rc != 0:
            raise RuntimeError(f"replay {' '.join(args)} failed: {err.getvalue()[-500:]}")

    return run


def measure(events: int, key_events: int, repeats: int, verbose: bool = True) -> dict[str, float]:
    """Best CPU seconds per run: ``"DENSITY PATH"`` for every density and path, plus
    ``"DENSITY msgspec decode loop"``, ``"1 key"`` and ``"10,000 keys"``."""
    say = print if verbose else (lambda *a, **k: None)
    with tempfile.TemporaryDirectory(prefix="bench-paths-") as tmp:
        runs: dict[str, Callable[[], None]] = {}
        for density, per_window in DENSITIES.items():
            sub = Path(tmp) / density
            sub.mkdir()
            paths = build_files(sub, events, per_window)
            runs.update({f"{density} {name}": _replay(args) for name, args in paths.items()})
            try:
                runs[f"{density} msgspec decode loop"] = decode_loop(paths["default"][0])
            except ImportError:
                say("msgspec not installed: no decode-loop ratio")
        runs.update({name: _replay(args) for name, args in build_key_files(Path(tmp), key_events).items()})
        best: dict[str, float] = {}
        for r in range(repeats):
            for name, run in runs.items():
                gc.collect()
                t0 = time.process_time()
                run()
                t = time.process_time() - t0
                best[name] = min(best.get(name, math.inf), t)
            say(f"round {r + 1}/{repeats} done")
    return best


#: (path, target cost per event against the default, the cost when the target was set: issue 24's
#: figures for the dense form, and for the sparse form (where issue 24 gave none) this benchmark's
#: smoke-size run on the code of 2026-11-28, what ``--check`` holds an open target to; None: the
#: target itself, for the paths that reached it - --no-state 2.1x/2.2x and --reference with no key
#: 2.5x/2.9x before)
LIMITS = [("--no-state", 1.3, None, None), ("--reference (keys)", 1.3, 2.7, 9.4),
          ("--reference (no key)", 1.3, None, None), ("hopping (--slide 20s)", 1.3, 3.4, 10.2),
          ("--task labels", 1.3, 2.3, 9.3), ("--task regression", 1.3, 1.5, 4.7),
          ("--task multiclass K=5", 3.0, 10.7, 45.0), ("delayed labels", 2.5, 11.6, 34.0)]
#: (delayed labels, sparse: 13.1 when set; 30-34 since the columnar decode made the default path
#: it is divided by 1.5x faster while the two-file ``replay --labels`` stays per event)
#: the 10,000-key rate over the one-key rate as last measured (0.44 before the columnar decode,
#: which made the one-key replay 2.4x faster and the 10,000-key one 1.1x: 0.20-0.22 since; 0.29-0.30
#: since the window engine stages column batches and builds small windows' texts in one pass)
KEYS_KNOWN = 0.29
#: replay's rate over the typed decode loop's when the target was set (same sources)
DECODE_KNOWN = {"dense": 0.06, "sparse": 0.06}


def targets(quick: bool, events: int | None = None, repeats: int | None = None, verbose: bool = False) -> list[Target]:
    events = events or (20_000 if quick else 200_000)
    key_events = 100_000 if quick else 1_000_000
    repeats = repeats or (2 if quick else 3)
    best = measure(events, key_events, repeats, verbose)
    say = print if verbose else (lambda *a, **k: None)
    say(f"\n{events} events per path ({key_events} for the key counts), best of {repeats} rounds, CPU s")
    say(f"{'path':36s} {'CPU s':>8s} {'us/event':>9s} {'x default':>9s}")
    for name, t in best.items():
        density = name.split(" ")[0]
        default = best.get(f"{density} default")
        n = events if default is not None else key_events
        say(f"{name:36s} {t:8.3f} {t / n * 1e6:9.2f} {t / default if default else math.nan:9.2f}")
    note = "smoke size" if quick else ""
    out = []
    for density, per_window in DENSITIES.items():
        default = best[f"{density} default"]
        where = f"{density}: {per_window} events/key/window"
        for name, limit, known_dense, known_sparse in LIMITS:
            out.append(Target("bench_paths", f"{name} CPU per event / default binary ({where})", limit,
                              best[f"{density} {name}"] / default, at_most=True, note=note,
                              known=known_dense if density == "dense" else known_sparse))
        if f"{density} msgspec decode loop" in best:
            out.append(Target("bench_paths", f"replay rate / typed msgspec decode loop rate ({where})", 0.2,
                              best[f"{density} msgspec decode loop"] / default, note=note,
                              known=DECODE_KNOWN[density]))
    out.append(Target("bench_paths", "10,000-key replay rate / 1-key rate (10 events/key/window)", 0.55,
                      best["1 key"] / best["10,000 keys"], note=note, known=KEYS_KNOWN))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--events", type=int, help="events per path (default 200,000; 20,000 with --quick)")
    ap.add_argument("--repeats", type=int, help="rounds (default 3; 2 with --quick)")
    ap.add_argument("--quick", action="store_true", help="smoke sizes")
    args = ap.parse_args()
    print_targets(targets(args.quick, args.events, args.repeats, verbose=True))


if __name__ == "__main__":
    main()
