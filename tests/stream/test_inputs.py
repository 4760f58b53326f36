"""Inputs (contract section 12): JSONL, CSV, Parquet and DataFrames give the same snapshots."""
from __future__ import annotations

import csv
import gzip
import json
import os
import random
import shutil
import sys
import warnings

import numpy as np
import pytest

import streammetrics as sm
from streammetrics.cli import main
from streammetrics.events.tables import CsvTyper, sniff

pd = pytest.importorskip("pandas")
pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

T0 = 1_700_000_000


def binary_events(n=600, seed=3, delayed=False):
    rng = random.Random(seed)
    out = []
    for i in range(n):
        ev = {"ts": T0 + round(i * 0.37 + rng.random() * 0.2, 3), "model": rng.choice(["m1", "m2"]),
              "segment": rng.choice(["a", "b", "c"]), "y_true": rng.randint(0, 1), "score": rng.random(),
              "weight": rng.choice([1.0, 0.5, 2.25]), "id": f"p{i}"}
        if delayed and i % 3 == 0:
            del ev["y_true"]
        out.append(ev)
    return out


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def write_csv(path, rows, columns=None):
    columns = columns or list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(columns)
        for r in rows:
            w.writerow(["" if r.get(c) is None else json.dumps(r[c]) if isinstance(r[c], (list, dict))
                        else repr(r[c]) if isinstance(r[c], float) else str(r[c]) for c in columns])


def write_parquet(path, rows):
    pq.write_table(pa.Table.from_pylist(rows), path)


def replay(tmp_path, path, *extra):
    out = tmp_path / f"{path.name}.out"
    assert main(["replay", str(path), "-o", str(out), "-q", *extra]) == 0
    return out.read_text().splitlines()


def test_binary_jsonl_csv_parquet_dataframe_equal(tmp_path):
    rows = binary_events()
    write_jsonl(tmp_path / "e.jsonl", rows)
    write_csv(tmp_path / "e.csv", rows)
    write_parquet(tmp_path / "e.parquet", rows)
    want = replay(tmp_path, tmp_path / "e.jsonl")
    assert len(want) > 20
    assert replay(tmp_path, tmp_path / "e.csv") == want
    assert replay(tmp_path, tmp_path / "e.parquet") == want
    frame = sm.replay_frame(pd.DataFrame(rows))
    assert frame["snapshot"].tolist() == want
    first = json.loads(want[0])
    assert frame.loc[0, "roc_auc"] == first["metrics"]["roc_auc"]
    assert (frame.loc[0, "model"], frame.loc[0, "window_start"]) == (first["key"]["model"], first["window"]["start"])
    # the same rows read from the Parquet file by pandas
    assert sm.replay_frame(pd.read_parquet(tmp_path / "e.parquet"))["snapshot"].tolist() == want


def test_format_flag_overrides_the_extension(tmp_path):
    rows = binary_events(100)
    write_csv(tmp_path / "e.txt", rows)
    write_parquet(tmp_path / "e.data", rows)
    write_jsonl(tmp_path / "e.jsonl", rows)
    want = replay(tmp_path, tmp_path / "e.jsonl")
    assert replay(tmp_path, tmp_path / "e.txt", "--format", "csv") == want
    assert replay(tmp_path, tmp_path / "e.data", "--format", "parquet") == want


@pytest.mark.parametrize("unit,factor", [("ms", 10**3), ("us", 10**6), ("ns", 10**9)])
def test_ts_unit(tmp_path, unit, factor):
    rows = binary_events(200)
    write_jsonl(tmp_path / "s.jsonl", rows)
    want = replay(tmp_path, tmp_path / "s.jsonl")
    scaled = [dict(r, ts=round(r["ts"] * 1000) * (factor // 1000)) for r in rows]  # exact integers
    write_jsonl(tmp_path / "u.jsonl", scaled)
    write_csv(tmp_path / "u.csv", scaled)
    write_parquet(tmp_path / "u.parquet", scaled)
    for name in ("u.jsonl", "u.csv", "u.parquet"):
        assert replay(tmp_path, tmp_path / name, "--ts-unit", unit) == want, name
    assert sm.replay_frame(pd.DataFrame(scaled), ts_unit=unit)["snapshot"].tolist() == want


def test_pandas_to_json_milliseconds(tmp_path, capsys):
    df = pd.DataFrame(binary_events(50))
    df["ts"] = pd.to_datetime(df["ts"], unit="s")
    with warnings.catch_warnings():  # pandas 3 announces that its default will change
        warnings.simplefilter("ignore")
        df.to_json(tmp_path / "p.jsonl", orient="records", lines=True)  # epoch ms, pandas' default
    assert main(["replay", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "x"), "--ts-unit", "ms"]) == 0
    assert "50 events applied, 0 rejected" in capsys.readouterr().err
    # without --ts-unit: every line rejected (years beyond 9999), exit 1
    assert main(["replay", str(tmp_path / "p.jsonl"), "-o", str(tmp_path / "y"), "-q"]) == 1


def test_timestamp_columns_are_event_times(tmp_path):
    rows = binary_events(200)
    write_jsonl(tmp_path / "s.jsonl", rows)
    want = replay(tmp_path, tmp_path / "s.jsonl")
    df = pd.DataFrame(rows)
    df["ts"] = pd.to_datetime([round(r["ts"] * 1000) for r in rows], unit="ms", utc=True)
    assert sm.replay_frame(df)["snapshot"].tolist() == want
    df.to_parquet(tmp_path / "t.parquet")
    assert replay(tmp_path, tmp_path / "t.parquet") == want
    naive = df.assign(ts=df["ts"].dt.tz_localize(None))  # zone-less: UTC, as ISO strings without a zone
    assert sm.replay_frame(naive)["snapshot"].tolist() == want


def test_multiclass_scores_in_cells_and_list_columns(tmp_path):
    rng = random.Random(5)
    classes = ["cat", "dog", "bird"]
    rows = []
    for i in range(300):
        raw = [rng.random() for _ in classes]
        rows.append({"ts": T0 + i, "model": "m", "y_true": rng.choice(classes),
                     "scores": [x / sum(raw) for x in raw]})
    write_jsonl(tmp_path / "m.jsonl", rows)
    write_csv(tmp_path / "m.csv", rows)
    write_parquet(tmp_path / "m.parquet", rows)
    flags = ["--task", "multiclass", "--classes", "cat,dog,bird"]
    want = replay(tmp_path, tmp_path / "m.jsonl", *flags)
    assert len(want) == 6
    assert replay(tmp_path, tmp_path / "m.csv", *flags) == want
    assert replay(tmp_path, tmp_path / "m.parquet", *flags) == want
    got = sm.replay_frame(pd.DataFrame(rows), task="multiclass", classes=classes)
    assert got["snapshot"].tolist() == want


def test_labels_and_regression_typed_by_task(tmp_path):
    rng = random.Random(7)
    rows = [{"ts": T0 + i, "model": "m", "y_true": rng.choice([0, 1, 2]), "y_pred": rng.choice([0, 1, 2])}
            for i in range(200)]
    write_jsonl(tmp_path / "l.jsonl", rows)
    write_csv(tmp_path / "l.csv", rows)
    want = replay(tmp_path, tmp_path / "l.jsonl", "--task", "labels")
    assert replay(tmp_path, tmp_path / "l.csv", "--task", "labels") == want
    assert json.loads(want[0])["metrics"]["accuracy"] is not None
    reg = [{"ts": T0 + i, "model": "m", "y_true": rng.gauss(0, 1), "y_pred": float(rng.randint(-3, 3))}
           for i in range(200)]
    write_jsonl(tmp_path / "r.jsonl", reg)
    write_csv(tmp_path / "r.csv", reg)
    want = replay(tmp_path, tmp_path / "r.jsonl", "--task", "regression")
    assert replay(tmp_path, tmp_path / "r.csv", "--task", "regression") == want
    assert sm.replay_frame(pd.DataFrame(reg), task="regression")["snapshot"].tolist() == want


def test_csv_cells_typed_by_task():
    typer = CsvTyper("binary", {}, None, 1)
    assert typer({"ts": "1700000000", "model": "m", "y_true": "1", "score": "0.25", "weight": ""}) == {
        "ts": 1700000000, "model": "m", "y_true": 1, "score": 0.25}
    assert typer({"y_true": "True", "score": "1"})["y_true"] == 1
    assert typer({"y_true": "false"})["y_true"] == 0
    assert typer({"y_true": "yes"})["y_true"] == "yes"  # the parser rejects it, naming the field
    assert typer({"ts": "2024-01-01T00:00:00Z"})["ts"] == "2024-01-01T00:00:00Z"
    assert typer({"model": "007", "id": "42"}) == {"model": "007", "id": "42"}  # strings stay strings
    labels = CsvTyper("labels", {}, None, 1)
    assert labels({"y_true": "1", "y_pred": "cat"}) == {"y_true": 1, "y_pred": "cat"}
    multi = CsvTyper("multiclass", {"y_true": "label"}, ["1", 2], 1)
    assert multi({"label": "1"})["label"] == "1" and multi({"label": "2"})["label"] == 2
    assert CsvTyper("binary", {}, None, 1000)({"ts": "1700000000123"})["ts"] == 1700000000.123


def test_csv_rows_rejected_naming_line_and_field(tmp_path, capsys):
    path = tmp_path / "bad.csv"
    path.write_text("ts,model,y_true,score\n1700000000,m,1,0.5\n1700000001,m,1,high\n1700000002,m,,0.5\n"
                    "1700000003,m,1,0.5,extra\n1700000004,m,yes,0.5\n1700000005,m,1," + "9" * 200_000 + "\n"
                    "1700000006,m,0,0.25\n")
    assert main(["replay", str(path), "-o", str(tmp_path / "o")]) == 0
    err = capsys.readouterr().err
    assert "line 3: field 'score' must be a finite number, got 'high'" in err
    assert "line 4: a prediction without field 'y_true' needs field 'id'" in err
    assert "line 5: row has 5 cells, the header names 4" in err
    assert "line 6:" in err and "'y_true'" in err
    assert "line 7: row not readable as CSV (field larger than field limit" in err  # that row only
    assert "2 events applied, 5 rejected" in err


def test_delayed_labels_from_csv_and_parquet(tmp_path):
    rows = binary_events(300, delayed=True)
    labels = [{"id": r["id"], "y_true": i % 2, "ts": r["ts"] + 5} for i, r in enumerate(rows) if "y_true" not in r]
    write_jsonl(tmp_path / "p.jsonl", rows)
    write_jsonl(tmp_path / "l.jsonl", labels)
    write_csv(tmp_path / "p.csv", rows)
    write_parquet(tmp_path / "l.parquet", labels)
    want = replay(tmp_path, tmp_path / "p.jsonl", "--labels", str(tmp_path / "l.jsonl"))
    assert any(json.loads(line)["revision"] > 0 for line in want)
    assert replay(tmp_path, tmp_path / "p.csv", "--labels", str(tmp_path / "l.parquet")) == want
    got = sm.replay_frame(pd.DataFrame(rows), label_events=pd.DataFrame(labels))
    assert got["snapshot"].tolist() == want


@pytest.mark.parametrize("name,content,flags,message", [
    ("e.jsonl", "ts,model,y_true,score\n1,m,1,0.5\n", [], "looks like CSV, not JSON Lines; give --format csv"),
    ("e.jsonl", None, [], "looks like Parquet, not JSON Lines; give --format parquet"),
    ("e.parquet", '{"ts": 1}\n', [], "looks like JSON Lines, not Parquet; give --format jsonl"),
    ("e.csv", '{"ts": 1}\n', [], "looks like JSON Lines, not CSV; give --format jsonl"),
    ("e.jsonl", b"gz", [], "is gzip-compressed"),
    ("e.csv", "ts,model\n\xff\n", [], None),
    ("e.csv", "ts;model;y_true;score\n1;m;1;0.5\n", [], "line 1: the header has no comma"),
])
def test_wrong_format_one_line(tmp_path, capsys, name, content, flags, message):
    path = tmp_path / name
    if content is None:
        write_parquet(path, binary_events(5))
    elif content == b"gz":
        path.write_bytes(gzip.compress(b'{"ts": 1}\n'))
    elif "\xff" in content:
        path.write_bytes(b"ts,model,y_true,score\n1700000000,m,1,0.5\n1700000001,m\xff,1,0.5\n")
        message = "line 3: not valid UTF-8 text"
    else:
        path.write_text(content)
    assert main(["replay", str(path), "-o", str(tmp_path / "o"), *flags]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_sniff_accepts_what_it_should():
    assert sniff(b'{"ts": 1}\n', "jsonl", "f") is None
    assert sniff(b"", "jsonl", "f") is None
    assert sniff(b"ts,model\n", "csv", "f") is None
    assert sniff(b"PAR1....", "parquet", "f") is None


def test_replay_frame_bad_input_one_line():
    df = pd.DataFrame(binary_events(20))
    with pytest.raises(ValueError, match=r"^replay_frame: df has no column 'score'"):
        sm.replay_frame(df.drop(columns=["score"]))
    with pytest.raises(ValueError, match=r"has no column 'p' \(fields maps 'score' to it\)"):
        sm.replay_frame(df, fields={"score": "p"})
    with pytest.raises(ValueError, match="must be a pandas DataFrame"):
        sm.replay_frame(df.to_dict("records"))
    with pytest.raises(ValueError, match="ts_unit must be one of s, ms, us, ns"):
        sm.replay_frame(df, ts_unit="sec")
    with pytest.raises(ValueError, match="errors must be"):
        sm.replay_frame(df, errors="ignore")
    with pytest.raises(ValueError, match="^replay_frame: unknown option 'windw'"):
        sm.replay_frame(df, windw="5m")
    cumulative = sm.replay_frame(df, cumulative=True)  # a PipelineConfig field, as replay's --cumulative
    assert len(cumulative) > len(sm.replay_frame(df))
    bad = df.astype({"score": object})
    bad.loc[7, "score"] = "x"
    with pytest.raises(ValueError, match=r"^replay_frame: row 7: field 'score' must be a finite number, got 'x'$"):
        sm.replay_frame(bad)
    skipped = sm.replay_frame(bad, errors="skip")
    assert skipped.attrs["rejected"] == {"bad_type": 1} and skipped["count"].sum() == 19
    nan = df.copy()
    nan.loc[3, "weight"] = float("nan")  # pandas' missing value: the default weight
    assert sm.replay_frame(nan)["count"].sum() == 20


@pytest.mark.slow
def test_replay_frame_equals_spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("no Java runtime: Spark needs Java 17")
    from pyspark.sql import SparkSession

    from streammetrics.spark import window_snapshots

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    rows = binary_events(300)
    session = (SparkSession.builder.master("local[1]").appName("streammetrics-inputs")
               .config("spark.driver.host", "127.0.0.1").config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "1")
               .config("spark.sql.session.timeZone", "UTC").getOrCreate())
    try:
        sdf = session.createDataFrame(pd.DataFrame(rows))
        spark_lines = sorted(r.snapshot for r in window_snapshots(sdf, window="60s").collect())
    finally:
        session.stop()
    assert sorted(sm.replay_frame(pd.DataFrame(rows))["snapshot"]) == spark_lines


def test_dataframe_missing_values_and_array_cells(tmp_path):
    rows = binary_events(120, delayed=True)
    write_jsonl(tmp_path / "d.jsonl", rows)
    want = replay(tmp_path, tmp_path / "d.jsonl")
    df = pd.DataFrame(rows)  # y_true: float with NaN where the label comes later
    assert df["y_true"].isna().sum() == 40
    assert sm.replay_frame(df)["snapshot"].tolist() == want
    nullable = df.astype({"y_true": "Int64", "segment": "string", "model": "category"})  # pd.NA, categories
    assert sm.replay_frame(nullable)["snapshot"].tolist() == want
    classes = ["x", "y"]
    multi = pd.DataFrame({"ts": [T0 + i for i in range(10)], "model": "m", "y_true": ["x", "y"] * 5,
                          "scores": [np.array([i / 10, 1 - i / 10]) for i in range(10)]})  # numpy arrays in cells
    as_lists = multi.assign(scores=[s.tolist() for s in multi["scores"]])
    got = sm.replay_frame(multi, task="multiclass", classes=classes)["snapshot"].tolist()
    assert got == sm.replay_frame(as_lists, task="multiclass", classes=classes)["snapshot"].tolist() and got
