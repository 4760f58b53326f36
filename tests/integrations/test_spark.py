"""streammetrics.spark equals ``streammetrics replay`` on the same events in time order.

One local Spark session (``local[2]``, loopback, no UI) for the module. The rows go to Spark
shuffled over three partitions; replay reads them sorted by ``ts`` from a JSONL file. Lines are
compared byte for byte, for every task: every float sum of the states is exact
(kernels.exact_sum; summed weights: kernels.exact_weights), so weights are any floats (0.1, 2.7,
random ones) as well as whole numbers.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import subprocess
import sys
from datetime import datetime, timezone

import pytest

pytestmark = pytest.mark.slow


def _java_missing() -> str | None:
    java = shutil.which("java") or (os.path.join(os.environ["JAVA_HOME"], "bin", "java")
                                    if os.environ.get("JAVA_HOME") else None)
    if java is None:
        return "no Java runtime (java not on PATH, JAVA_HOME unset): Spark needs Java 17"
    try:
        subprocess.run([java, "-version"], capture_output=True, check=True, timeout=60)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"java -version failed: {exc}"
    return None


pyspark = pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'streammetrics[spark]')")
pytest.importorskip("pyarrow", reason="pyarrow is not installed (pip install 'streammetrics[spark]')")
if _java_missing():
    pytest.skip(_java_missing() or "", allow_module_level=True)

from pyspark.sql import SparkSession  # noqa: E402

from streammetrics.cli import main  # noqa: E402
from streammetrics.spark import merge_snapshots, window_snapshots  # noqa: E402

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@pytest.fixture(scope="module")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = (SparkSession.builder.master("local[2]").appName("streammetrics-tests")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


# --------------------------------------------------------------------------- helpers
def replay(tmp_path, events, *args):
    """replay's lines and its rejection reasons for ``events`` (written sorted by ts)."""
    path = tmp_path / f"events{random.random()}.jsonl"
    with open(path, "w") as f:
        for e in sorted(events, key=lambda e: e["ts"]):
            f.write(json.dumps({k: v for k, v in e.items() if v is not None}) + "\n")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        assert main(["replay", str(path), "--progress", "off", *args]) == 0
    reasons = [line.split(": ", 1)[1] for line in err.getvalue().splitlines() if line.startswith("line ")]
    return out.getvalue().splitlines(), sorted(reasons)


def frame(spark, events, schema):
    rows = list(events)
    random.Random(5).shuffle(rows)
    names = [c.split()[0] for c in schema.split(",")]
    return spark.createDataFrame([tuple(e.get(n) for n in names) for e in rows], schema).repartition(3)


def by_window(lines):
    out = {}
    for line in lines:
        s = json.loads(line)
        out[(s["key"]["model"], s["key"]["segment"], s["window"]["start"])] = line
    return out


def assert_same(spark_lines, replay_lines):
    """The same windows, and each window's line byte for byte."""
    got, want = by_window(spark_lines), by_window(replay_lines)
    assert want and sorted(got) == sorted(want)
    for k in want:
        assert got[k] == want[k], k


def binary_events(n, seed=1, weights=False, dyadic=False):
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        score = rnd.randrange(1025) / 1024 if dyadic else rnd.random()
        out.append({"ts": T0 + rnd.random() * 300, "model": rnd.choice(["a", "b"]), "segment": rnd.choice(["x", "y"]),
                    "y_true": int(rnd.random() < score), "score": score, "id": f"p{i}",
                    "weight": rnd.choice([0.1, 1.0, 2.7, rnd.random() * 3]) if weights else None})
    return out


BINARY = "ts double, model string, segment string, y_true long, score double, weight double, id string"


# --------------------------------------------------------------------------- tests
def test_binary_hopping_weights_segments_and_rejections(spark, tmp_path):
    events = binary_events(3000, weights=True)
    events += [{"ts": T0 + 5, "model": "a", "y_true": 3, "score": 0.2},
               {"ts": T0 + 6, "model": "a|b", "y_true": 1, "score": 0.2},
               {"ts": T0 + 7, "model": "b", "y_true": 1, "score": 0.2, "weight": -1.0},
               {"ts": T0 + 8, "model": "b", "y_true": 1}]
    want, reasons = replay(tmp_path, events, "--window", "60s", "--slide", "20s")
    snaps, rejected = window_snapshots(frame(spark, events, BINARY), window="60s", slide="20s", with_rejections=True)
    rows = snaps.collect()
    assert_same([r.snapshot for r in rows], want)
    assert all(r.window_end.timestamp() - r.window_start.timestamp() == 60 for r in rows)
    got = sorted(r.reason for r in rejected.collect() for _ in range(r["count"]))
    assert got == reasons and len(got) == 4


def test_every_task_equals_replay(spark, tmp_path):
    rnd = random.Random(2)
    classes = ["cat", "dog", "emu"]
    multi, labels, regression = [], [], []
    for _ in range(1500):
        ts, model = T0 + rnd.random() * 200, rnd.choice(["m1", "m2"])
        p = [rnd.random() for _ in classes]
        multi.append({"ts": ts, "model": model, "y_true": rnd.choice(classes), "scores": [x / sum(p) for x in p],
                      "weight": rnd.choice([None, 0.1, 2.0, rnd.random() * 3])})
        labels.append({"ts": round(ts * 1e6) / 1e6, "model": model, "y_true": rnd.choice(classes),
                       "y_pred": rnd.choice(classes), "weight": rnd.choice([None, 0.3, 1.7, rnd.random()])})
        regression.append({"ts": ts, "model": model, "label": rnd.gauss(3, 1), "y_pred": rnd.gauss(3, 1.2),
                           "weight": rnd.choice([None, 0.1, 2.7])})
    results = {}
    frames = {
        "multiclass": (multi, "ts double, model string, y_true string, scores array<double>, weight double",
                       dict(task="multiclass", classes=classes), ["--task", "multiclass", "--classes", "cat,dog,emu"]),
        "labels": (labels, "ts double, model string, y_true string, y_pred string, weight double", dict(task="labels"),
                   ["--task", "labels"]),
        "regression": (regression, "ts double, model string, label double, y_pred double, weight double",
                       dict(task="regression", fields={"y_true": "label"}, slide="15s", max_open_states=2),
                       ["--task", "regression", "--field", "y_true=label", "--slide", "15s"]),
    }
    union = None
    for name, (events, schema, kwargs, _) in frames.items():
        if name == "labels":  # a timestamp column
            events = [{**e, "ts": datetime.fromtimestamp(e["ts"], timezone.utc)} for e in events]
            schema = schema.replace("ts double", "ts timestamp")
        df = window_snapshots(frame(spark, events, schema), window="30s", **kwargs).selectExpr(f"'{name}' AS task",
                                                                                                "snapshot")
        union = df if union is None else union.unionByName(df)
    for row in union.collect():
        results.setdefault(row.task, []).append(row.snapshot)
    for name, (events, _, _, args) in frames.items():
        want, _ = replay(tmp_path, events, "--window", "30s", *args)
        assert_same(results[name], want)


def test_merge_snapshots_rolls_up_windows_and_segments(spark, tmp_path):
    events = binary_events(2000, seed=4, weights=True)
    minutes = window_snapshots(frame(spark, events, BINARY), window="60s")
    by_5min = [r.snapshot for r in merge_snapshots(minutes, window="300s").collect()]
    want, _ = replay(tmp_path, events, "--window", "300s")
    assert_same(by_5min, want)
    across = [r.snapshot for r in merge_snapshots(minutes, window="300s", by=("model",)).collect()]
    want, _ = replay(tmp_path, [{**e, "segment": None} for e in events], "--window", "300s")
    assert_same(across, want)


DELAYED = {  # task -> (prediction fields, label, schema of the prediction fields, label type, options)
    "binary": (lambda rnd: {"score": rnd.random()}, lambda rnd, p: int(rnd.random() < p["score"]),
               "score double", "long", {}, []),
    "multiclass": (lambda rnd: {"scores": [0.25, 0.25, 0.5] if rnd.random() < 0.5 else [0.5, 0.375, 0.125]},
                   lambda rnd, p: rnd.choice(["a", "b", "c"]), "scores array<double>", "string",
                   {"classes": ["a", "b", "c"]}, ["--classes", "a,b,c"]),
    "regression": (lambda rnd: {"y_pred": rnd.gauss(0, 1)}, lambda rnd, p: p["y_pred"] + rnd.gauss(0, 0.3),
                   "y_pred double", "double", {}, []),
}


@pytest.mark.parametrize("task", sorted(DELAYED))
def test_delayed_labels_final_counts(spark, tmp_path, task):
    pred_fields, label_of, schema, label_type, options, args = DELAYED[task]
    rnd = random.Random(9)
    preds, label_rows = [], []
    for i in range(300):
        ts = T0 + rnd.random() * 120
        fields = pred_fields(rnd)
        y = label_of(rnd, fields)
        other = label_of(rnd, fields)
        common = {"ts": ts, "model": "m", "segment": rnd.choice(["x", "y"]), "id": f"i{i}",
                  "weight": rnd.choice([None, 0.1, 2.5, rnd.random() * 2]), **fields}
        fate = rnd.random()
        if fate < 0.2:  # labelled inline
            preds.append({**common, "y_true": y})
            continue
        preds.append(common)
        if fate < 0.7:  # label within the ttl (30s)
            label_rows.append({"id": f"i{i}", "y_true": y, "ts": ts + rnd.random() * 29})
            if fate < 0.3:  # a duplicate with another value, ignored
                label_rows.append({"id": f"i{i}", "y_true": other, "ts": ts + 29.5})
        elif fate < 0.8:  # too late: the prediction expired
            label_rows.append({"id": f"i{i}", "y_true": y, "ts": ts + 45})
    for i in range(5):  # no label yet, and the end of input within the ttl: pending, window not final
        preds.append({"ts": T0 + 150 + i, "model": "m", "segment": "x", "id": f"late{i}", **pred_fields(rnd)})
    preds_df = frame(spark, preds, f"ts double, model string, segment string, id string, weight double, {schema}, "
                                   f"y_true {label_type}")
    labels_df = spark.createDataFrame(  # label times as ISO-8601 text
        [(r["id"], r["y_true"], datetime.fromtimestamp(r["ts"], timezone.utc).isoformat()) for r in label_rows],
        f"id string, y_true {label_type}, ts string").repartition(2)
    got = by_window(r.snapshot for r in window_snapshots(preds_df, task=task, window="60s", label_events=labels_df,
                                                         label_ttl="30s", **options).collect())
    # replay of the same predictions and labels: the last revision of each window
    path = tmp_path / "labels.jsonl"
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in sorted(label_rows, key=lambda r: r["ts"]))
    lines, _ = replay(tmp_path, preds, "--task", task, *args, "--window", "60s", "--labels", str(path),
                      "--label-ttl", "30s")
    last = by_window(lines)  # the last revision of each window
    assert sorted(got) == sorted(last)
    for k, line in got.items():  # replay's last revision, byte for byte (revision number included)
        assert line == last[k], k
    snaps = [json.loads(line) for line in last.values()]
    assert any(s["pending"] for s in snaps) and any(s["expired"] for s in snaps)
    assert any(not s["final"] for s in snaps) and any(s["revision"] for s in snaps)


DELAYED_LABELS_TASK = (lambda rnd: {"y_pred": rnd.choice(["a", "b", "c"])}, lambda rnd, p: rnd.choice(["a", "b", "c"]),
                       "y_pred string", "string", {}, [])


def test_delayed_label_revisions_over_many_panes_equal_replay(spark, tmp_path):
    """Every task, labels arriving over many panes of hopping windows with grace: labels before
    their prediction, within the TTL, duplicates, too late (expired), none (expired or still
    pending at the end), predictions at whole seconds (many equal ``ts``, several keys), rows
    shuffled over three partitions. Each window's Spark line is replay's last revision byte for
    byte, revision number included (revisions counted per revision-tick pane after the close)."""
    tasks = {**DELAYED, "labels": DELAYED_LABELS_TASK}
    rnd = random.Random(12)
    runs, union = {}, None
    for task, (pred_fields, label_of, schema, label_type, options, args) in sorted(tasks.items()):
        preds, label_rows = [], []
        for i in range(500):
            ts = T0 + rnd.randrange(240)
            fields = pred_fields(rnd)
            common = {"ts": ts, "model": rnd.choice(["m", "n"]), "segment": rnd.choice(["x", "y"]), "id": f"i{i}",
                      "weight": rnd.choice([None, 0.1, 2.5, rnd.random() * 2]), **fields}
            fate = rnd.random()
            if fate < 0.1:  # labelled inline
                preds.append({**common, "y_true": label_of(rnd, fields)})
                continue
            preds.append(common)
            if fate < 0.8:  # a label 5 s before to 45 s after its prediction (TTL 30 s: some expire)
                label_rows.append({"id": f"i{i}", "y_true": label_of(rnd, fields), "ts": ts + rnd.randrange(-5, 46)})
                if fate < 0.2:  # a second label: a duplicate within the TTL, else a label for nothing
                    label_rows.append({"id": f"i{i}", "y_true": label_of(rnd, fields), "ts": ts + rnd.randrange(50)})
        for i in range(4):  # still awaiting labels at the end
            preds.append({"ts": T0 + 260, "model": "m", "segment": "x", "id": f"end{i}", **pred_fields(rnd)})
        columns = f"ts double, model string, segment string, id string, weight double, {schema}, y_true {label_type}"
        labels_df = spark.createDataFrame([(r["id"], r["y_true"], r["ts"]) for r in label_rows],
                                          f"id string, y_true {label_type}, ts double").repartition(2)
        df = window_snapshots(frame(spark, preds, columns), task=task, window="10s", slide="5s", grace="2s",
                              label_events=labels_df, label_ttl="30s", **options)
        df = df.selectExpr(f"'{task}' AS task", "snapshot")
        union = df if union is None else union.unionByName(df)
        runs[task] = (preds, label_rows, args)
    got: dict[str, list[str]] = {}
    for row in union.collect():
        got.setdefault(row.task, []).append(row.snapshot)
    for task, (preds, label_rows, args) in runs.items():
        path = tmp_path / f"labels-{task}.jsonl"
        with open(path, "w") as f:
            f.writelines(json.dumps(r) + "\n" for r in sorted(label_rows, key=lambda r: r["ts"]))
        lines, _ = replay(tmp_path, preds, "--task", task, *args, "--window", "10s", "--slide", "5s", "--grace", "2s",
                          "--labels", str(path), "--label-ttl", "30s")
        assert_same(got[task], lines)  # by_window keeps each window's last line
        last = [json.loads(line) for line in by_window(lines).values()]
        assert max(s["revision"] for s in last) >= 3, task
        assert any(s["expired"] for s in last) and any(s["pending"] for s in last), task


def test_foreach_batch_partial_windows_merge_to_replay(spark, tmp_path):
    """The Structured Streaming example of docs/guide/spark.md: each micro-batch's snapshots (partial windows
    when a window spans two batches) appended to a table, then merged with merge_snapshots."""
    events = sorted(binary_events(1200, seed=6, weights=True), key=lambda e: e["ts"])
    src = tmp_path / "in"
    src.mkdir()
    for i, part in enumerate((events[:500], events[500:])):  # the cut falls inside a window
        with open(src / f"part-{i}.json", "w") as f:
            f.writelines(json.dumps({k: v for k, v in e.items() if v is not None}) + "\n" for e in part)
    out = str(tmp_path / "snapshots")

    def write(batch_df, batch_id):
        window_snapshots(batch_df, window="60s").write.mode("append").parquet(out)

    query = (spark.readStream.schema(BINARY).option("maxFilesPerTrigger", 1).json(str(src))
             .writeStream.foreachBatch(write).option("checkpointLocation", str(tmp_path / "ckpt"))
             .trigger(availableNow=True).start())
    query.awaitTermination(300)
    partial = spark.read.parquet(out)
    assert partial.count() > len(by_window(replay(tmp_path, events, "--window", "60s")[0]))  # split windows
    merged = [r.snapshot for r in merge_snapshots(partial).collect()]
    assert_same(merged, replay(tmp_path, events, "--window", "60s")[0])


def test_vectorised_reader_takes_the_rows_replay_accepts_and_leaves_the_rest(spark, tmp_path):
    """The binary partial-state stage reads well-typed rows as Arrow columns: it takes exactly
    the rows replay's parser accepts as they are, leaves the others to the per-row path, and
    Spark's snapshots are the same with it (default) and without it (``vectorised=False``)."""
    import pyarrow as pa

    from streammetrics.events.parser import EventParser
    from streammetrics.integrations.spark import _binary_columns, _Config
    from streammetrics.stream.windows import WindowSpec

    cfg = _Config("binary", 0.5, None, None, None, WindowSpec(60.0), True, [], 10)
    read = _binary_columns(cfg, EventParser("binary"))
    batch = pa.RecordBatch.from_pydict({
        "ts": [T0, T0 + 1, None, T0 + 2, T0 + 3, T0 + 4, 1e15, T0 + 5],
        "model": ["a", "a|b", "a", "", "b", "b", "b", "x" * 1001],
        "segment": [None, "s", "s", "s", "s", "s", "s", "s"],
        "y_true": [1, 1, 1, 1, 2, 0, 0, 0],
        "score": [0.2, 0.2, 0.2, 0.2, 0.2, float("nan"), 0.3, 0.3],
        "weight": [None, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0],
    })
    keys, groups, rest = read(batch)
    assert keys == [("a", "", int(T0 * 1e6 + 0.5) // 60_000_000)] and [len(g[0]) for g in groups] == [1]
    parse = EventParser("binary").parse
    assert all(type(parse({k: v for k, v in row.items() if v is not None})).__name__ == "Rejection"
               for row in rest.to_pylist())
    assert rest.num_rows == 7
    events = binary_events(600, seed=8, weights=True)
    df = frame(spark, events, BINARY)
    on = sorted(r.snapshot for r in window_snapshots(df, window="60s").collect())
    off = sorted(r.snapshot for r in window_snapshots(df, window="60s", vectorised=False).collect())
    assert on == off


def test_operating_points_equal_replay(spark, tmp_path):
    """Contract section 11: the operating-point metrics of replay's flags, byte for byte."""
    from streammetrics.monitors.operating_points import OperatingPoints

    events = binary_events(2000, seed=4)
    want, _ = replay(tmp_path, events, "--window", "60s", "--target-recall", "0.6", "--target-fpr", "0.1",
                     "--cost-fp", "1", "--cost-fn", "5")
    points = OperatingPoints(target_recall=0.6, target_fpr=0.1, cost_fp=1.0, cost_fn=5.0)
    rows = window_snapshots(frame(spark, events, BINARY), window="60s", operating_points=points).collect()
    assert_same([r.snapshot for r in rows], want)
    assert all("tpr_at_fpr" in json.loads(r.snapshot)["metrics"] for r in rows)


def test_slices_rollups_budget_and_fairness_equal_replay(spark, tmp_path):
    """Contract section 11: ``slicing=SliceSpec(...)`` gives replay's lines for ``--slice-by``,
    ``--max-slice-values`` (each window's most frequent values), ``--rollup`` and
    ``--fairness-by``, byte for byte, with and without state."""
    from streammetrics.stream.slicing import OTHER, SliceSpec, sliced_snapshot_key

    rnd = random.Random(12)
    events = [{**e, "country": rnd.choice(["us", "us", "us", "fr", "fr", "de", "jp"]),
               "device": rnd.choice(["ios", "web", "android"]), "tier": rnd.choice([1, 2, None])}
              for e in binary_events(3000, seed=12)]
    spec = SliceSpec(fields=("country", "device", "tier"), max_values=2, rollups=(("country",), ()),
                     fairness_by="device", worst_slices=3)
    df = frame(spark, events, BINARY + ", country string, device string, tier long")
    for state in (True, False):
        flags = ["--window", "60s", "--slice-by", "country,device,tier", "--max-slice-values", "2", "--rollup",
                 "country", "--rollup", "model", "--fairness-by", "device", "--worst-slices", "3"]
        want, _ = replay(tmp_path, events, *flags, *([] if state else ["--no-state"]))
        rows = window_snapshots(df, window="60s", slicing=spec, include_state=state).collect()
        got = {sliced_snapshot_key(json.loads(r.snapshot)): r.snapshot for r in rows}
        expected = {sliced_snapshot_key(json.loads(line)): line for line in want}
        assert expected and sorted(got) == sorted(expected)
        for k in expected:
            assert got[k] == expected[k], k
        snaps = [json.loads(line) for line in want]
        assert any(s["key"].get("country") == OTHER for s in snaps) and any("fairness" in s for s in snaps)
        assert {r.segment for r in rows if '"rollup"' in r.snapshot} >= {"rollup: model"}
    with pytest.raises(ValueError, match="label_events"):
        window_snapshots(df, slicing=spec, label_events=df)
    from streammetrics.monitors.operating_points import OperatingPoints  # and with operating points

    want, _ = replay(tmp_path, events, *flags, "--no-state", "--target-recall", "0.6", "--cost-fp", "1",
                     "--cost-fn", "4")
    points = OperatingPoints(target_recall=0.6, cost_fp=1.0, cost_fn=4.0)
    rows = window_snapshots(df, window="60s", slicing=spec, include_state=False, operating_points=points).collect()
    assert sorted(r.snapshot for r in rows) == sorted(want)
    assert all("precision_at_recall" in json.loads(line)["metrics"] for line in want)
