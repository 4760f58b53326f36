"""``streammetrics report`` on hostile input: malformed snapshot lines, mutated snapshots, names
that are markup, mathtext or very long.

The named cases of issue 10 point 11 (a count of ``Infinity``, a 400-digit number, a window
start of 1e300, a non-dict ``per_class``, a class label ``$\\foo$``) each crashed the report;
here they are skipped and counted, or drawn literally. Hypothesis mutates valid snapshots (of
all four tasks, with state) anywhere in their tree and as raw text: the loader and the page
never raise, every line is either a snapshot or counted as skipped, and no chart of an
accepted snapshot fails to draw.
"""
from __future__ import annotations

import copy
import json
import math
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from streammetrics import cli

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from test_report import (  # noqa: E402  (the tiny DOM and replay helpers of the main report tests)
    charts,
    label_events,
    multiclass_events,
    parse_html,
    regression_events,
    replay,
    sections,
    write_events,
)

from streammetrics.report import build_report  # noqa: E402
from streammetrics.report.charts import chart_text  # noqa: E402
from streammetrics.report.sources import MAX_PROBLEMS, LoadResult, read_jsonl  # noqa: E402


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def valid_lines(workdir: Path) -> dict[str, list[str]]:
    """A few windows per task, as replay writes them (with state)."""
    return {
        "binary": replay(workdir, "bin", "--sample").read_text().splitlines()[:9],
        "multiclass": replay(workdir, "mc", str(write_events(workdir / "mc-events.jsonl", multiclass_events(240))),
                             "--task", "multiclass", "--classes", "cat,dog,bird").read_text().splitlines(),
        "labels": replay(workdir, "lab", str(write_events(workdir / "lab-events.jsonl", label_events(180))),
                         "--task", "labels").read_text().splitlines(),
        "regression": replay(workdir, "reg", str(write_events(workdir / "reg-events.jsonl", regression_events(180))),
                             "--task", "regression").read_text().splitlines(),
    }


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    code = cli.main(["report", *args])
    return code, capsys.readouterr().err


# ---------------------------------------------------------------------- the named cases
def _set(snapshot: dict, path: tuple, value: Any) -> dict:
    out = copy.deepcopy(snapshot)
    node = out
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return out


NAMED = [  # (path, bad value as JSON text, field counted, words of the reason)
    (("count",), "Infinity", "count", "count must be a non-negative integer"),
    (("count",), "9" * 400, "count", "an integer of 400 digits"),
    (("late",), "-1", "late", "late must be a non-negative integer"),
    (("window", "start"), "1e300", "window.start", "window.start must be an epoch time"),
    (("window", "end"), "NaN", "window.end", "window.end must be a finite number"),
    (("window", "start"), "9" * 400, "window.start", "an integer of 400 digits"),
    (("metrics", "roc_auc"), "9" * 400, "metrics", "metrics.roc_auc must be a finite number"),
    (("metrics", "f1"), "-Infinity", "metrics", "metrics.f1 must be a finite number"),
    (("metrics", "accuracy"), '"0.9"', "metrics", "metrics.accuracy must be a finite number, got '0.9'"),
    (("metrics", "per_class"), "[1, 2]", "metrics.per_class", "metrics.per_class must be an object"),
    (("metrics", "per_class"), '{"cat": 0.5}', "metrics.per_class", "metrics.per_class['cat'] must be an object"),
    (("metrics", "per_class"), '{"cat": {"recall": "high"}}', "metrics.per_class", "per_class.recall"),
    (("key", "model"), "42", "key", "key must be an object with a string 'model'"),
    (("key", "segment"), "[]", "key", "key.segment must be a string"),
    (("cumulative",), '"no"', "cumulative", "cumulative must be true or false"),
    (("state",), "[1]", "state", "state must be an object"),
]


@pytest.mark.parametrize("path, bad, field, reason", NAMED, ids=[f"{'.'.join(n[0])}={n[1][:12]}" for n in NAMED])
def test_named_bad_values_skip_their_line_with_the_reason(capsys: pytest.CaptureFixture, tmp_path: Path,
                                                           valid_lines: dict[str, list[str]], path: tuple,
                                                           bad: str, field: str, reason: str) -> None:
    lines = valid_lines["multiclass"][:4]
    marker = "__BAD__"
    victim = json.dumps(_set(json.loads(lines[1]), path, marker)).replace(f'"{marker}"', bad)
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join([lines[0], victim, *lines[2:]]) + "\n")
    out = tmp_path / "r.html"
    code, err = run_cli(capsys, str(source), "-o", str(out))
    assert code == 0, err
    assert f"skipped 1 malformed snapshot in {source} (1 {field})" in err
    assert "line 2: " in err and reason in err, err
    doc = parse_html(out.read_text(encoding="utf-8"))
    skipped = doc.find("section", id="skipped").text
    assert "1 malformed snapshot skipped" in skipped and "line 2: " in skipped and reason in skipped
    assert sum(int(s.find("p", class_="meta").text.split()[0]) for s in sections(doc).values()) == 3  # windows


def test_an_interval_end_too_large_for_a_float_drops_that_interval_only(valid_lines: dict[str, list[str]]) -> None:
    # found by the fuzz test below: read_jsonl raised OverflowError on a 400-digit interval end
    snap = json.loads(valid_lines["binary"][0])
    kept = {k: v for k, v in snap["intervals"].items() if isinstance(v, list)}
    assert "accuracy" in kept
    line = json.dumps(snap).replace(json.dumps(snap["intervals"]["accuracy"]),
                                    "[0.5, " + "9" * 400 + "]", 1)
    [loaded] = read_jsonl([line]).snapshots
    assert "accuracy" not in loaded.intervals
    assert set(loaded.intervals) == set(kept) - {"accuracy"}


def test_many_bad_lines_are_counted_per_reason_and_listed_first_ones(capsys: pytest.CaptureFixture, tmp_path: Path,
                                                                     valid_lines: dict[str, list[str]]) -> None:
    good = valid_lines["regression"][:2]
    bad = ['{"schema": "streammetrics.snapshot/1", "count": Infinity}'] * 30 + ["{"] * 10
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(good + bad) + "\n")
    out = tmp_path / "r.html"
    code, err = run_cli(capsys, str(source), "-o", str(out))
    assert code == 0
    assert "skipped 40 malformed snapshots" in err and "(30 key, 10 not JSON)" in err
    assert "line 3: key must be an object" in err and f"... and {40 - MAX_PROBLEMS} more" in err
    skipped = parse_html(out.read_text(encoding="utf-8")).find("section", id="skipped")
    assert len(skipped.find_all("li")) == 6 and "… and 35 more" in skipped.text  # 5 listed, then the count


def test_overlong_lines_are_skipped_without_reading_them_whole(valid_lines: dict[str, list[str]]) -> None:
    import io

    good = valid_lines["binary"][0]
    limit = len(good.encode()) + 100  # a valid snapshot line fits; the line of 2 * limit does not
    data = (good + "\n" + '{"x": "' + "y" * (2 * limit) + '"}\n' + good.replace('"start":', '"start": ', 1)
            + "\n").encode()
    loaded = read_jsonl(io.BufferedReader(io.BytesIO(data)), max_line_bytes=limit)  # type: ignore[arg-type]
    assert loaded.skipped == 1 and loaded.problems == [f"line 2: longer than {limit:,} bytes"]
    assert len(loaded.snapshots) == 1  # line 3 is line 1's window again (kept once), read after the skip
    assert loaded.duplicates == 1


def test_fast_and_json_decoding_accept_and_reject_the_same_lines(valid_lines: dict[str, list[str]]) -> None:
    pytest.importorskip("msgspec")
    line = valid_lines["binary"][0]
    variants = [line, line.replace('"count":', '"count": Infinity, "x":', 1), line.replace("}", "", 1), "\ud800",
                line.replace('"web"', '"\\ud800"', 1), line.replace('"start":', '"start":' + "9" * 400 + ",\"s\":", 1),
                "[1]", "null", '{"schema": "streammetrics.snapshot/1"}']
    fast, slow = read_jsonl(variants, fast=True), read_jsonl(variants, fast=False)
    assert (fast.skipped, fast.problems) == (slow.skipped, slow.problems)
    assert [s.identity for s in fast.snapshots] == [s.identity for s in slow.snapshots]
    assert [s.state == t.state for s, t in zip(fast.snapshots, slow.snapshots)] == [True] * len(fast.snapshots)


# ---------------------------------------------------------------------- hostile names
def test_hostile_model_segment_and_class_names_are_escaped_and_drawn_literally(tmp_path: Path) -> None:
    classes = ["$\\foo$", "<script>alert(1)</script>", "R&D", "y" * 300, "日本語 ☃", "\\"]
    events = [e | {"model": "<script>x</script>$\\alpha$", "segment": "a&b \"c\" " + "z" * 900,
                   "y_true": classes[int(i) % len(classes)], "y_pred": classes[(int(i) + (i % 3 == 0)) % len(classes)]}
              for i, e in enumerate(label_events(240))]
    labels = replay(tmp_path, "lab", str(write_events(tmp_path / "lab-events.jsonl", events)), "--task", "labels")
    mc = [e | {"model": "$x$ & \\ <i>", "segment": "\ud83d\ude00"} for e in multiclass_events(180)]
    multi = replay(tmp_path, "mc", str(write_events(tmp_path / "mc-events.jsonl", mc)),
                   "--task", "multiclass", "--classes", "cat,dog,bird")
    long_name = json.loads(multi.read_text().splitlines()[0])
    long_name["key"] = {"model": "m" * 5000 + "<script>", "segment": "\u0000\u202e"}  # longer than replay allows
    source = tmp_path / "all.jsonl"
    source.write_text(labels.read_text() + multi.read_text() + json.dumps(long_name) + "\n")
    out = tmp_path / "r.html"
    assert cli.main(["report", str(source), "-o", str(out), "--title", "<b>$\\x$</b>"]) == 0
    text = out.read_text(encoding="utf-8")
    doc = parse_html(text)
    assert not doc.find_all("script") and not doc.find_all("i") and not doc.find_all("b")
    assert doc.find("h1").text == "<b>$\\x$</b>"
    found = sections(doc)
    assert set(found) == {("<script>x</script>$\\alpha$", "a&b \"c\" " + "z" * 900), ("$x$ & \\ <i>", "😀"),
                          ("m" * 5000 + "<script>", "\ufffd\u202e")}  # NUL shown as browsers show it
    row = doc.find("tr", data_key="m" * 5000 + "<script>|\ufffd\u202e")
    assert len(row.find("a").text) <= 80 and row.find("a").attrs["title"].startswith("m" * 5000)
    section = found[("<script>x</script>$\\alpha$", "a&b \"c\" " + "z" * 900)]
    assert section.find("h2").text.startswith("<script>x</script>$\\alpha$ / a&b")
    assert "could not be drawn" not in text
    drawn = charts(section)
    assert set(drawn) == {"quality", "class-recall", "class-precision", "count", "confusion"}
    legend = drawn["class-recall"].text
    assert "$\\foo$" in legend and "<script>alert(1)</script>" in legend and "R&D" in legend  # literal, escaped
    assert chart_text("y" * 300) in legend and "y" * 40 not in legend  # cut to MAX_LABEL_CHARS
    confusion = drawn["confusion"].text
    assert "$\\foo$" in confusion and "R&D" in confusion


# ---------------------------------------------------------------------- fuzzing
HOSTILE_VALUES = st.one_of(
    st.sampled_from([math.inf, -math.inf, math.nan, 10 ** 400, -(10 ** 400), 2 ** 63, 2 ** 64, 1e300, -1e300,
                     1e-300, 0, -1, 0.5, 1, True, False, None, "", "$\\foo$", "<script>", "&amp;", "x" * 10_000,
                     "\ud800", [], {}, [1, "a"], {"a": {"b": None}}, 253_402_300_800, -62_135_596_800]),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.text(max_size=30),
    st.lists(st.integers(), max_size=5), st.dictionaries(st.text(max_size=5), st.floats(), max_size=3),
)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path into a JSON tree (lists capped to their first few items)."""
    out = [prefix] if prefix else []
    if isinstance(node, dict):
        for k, v in node.items():
            out.extend(_paths(v, prefix + (k,)))
    elif isinstance(node, list):
        for i, v in enumerate(node[:4]):
            out.extend(_paths(v, prefix + (i,)))
    return out


@st.composite
def mutated_line(draw: st.DrawFn, lines: list[str]) -> str:
    """A valid snapshot line with one value replaced, one key deleted or added, or its text cut/garbled."""
    line = draw(st.sampled_from(lines))
    how = draw(st.sampled_from(["replace", "replace", "replace", "delete", "add", "cut", "garble"]))
    if how == "cut":
        return line[:draw(st.integers(0, len(line)))]
    if how == "garble":
        at = draw(st.integers(0, len(line)))
        return line[:at] + draw(st.text(min_size=1, max_size=8)) + line[at:]
    snap = json.loads(line)
    path = draw(st.sampled_from(_paths(snap)))
    parent = snap
    for part in path[:-1]:
        parent = parent[part]
    if how == "replace":
        parent[path[-1]] = draw(HOSTILE_VALUES)
    elif how == "delete" and isinstance(parent, dict):
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[draw(st.text(max_size=8))] = draw(HOSTILE_VALUES)
    return json.dumps(snap)  # allow_nan: Infinity and NaN appear as a broken writer would write them


def _check_loaded(loaded: LoadResult, lines: list[str]) -> None:
    nonblank = sum(1 for line in lines if line.strip())
    # every line is kept, a duplicate of a kept one, an earlier revision of a kept window, or skipped
    assert len(loaded.snapshots) + loaded.duplicates + loaded.superseded + loaded.skipped == nonblank
    assert sum(loaded.reasons.values()) == loaded.skipped


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_snapshots_never_break_the_loader_or_the_tables(valid_lines: dict[str, list[str]],
                                                                data: st.DataObject) -> None:
    task = data.draw(st.sampled_from(sorted(valid_lines)))
    lines = valid_lines[task][:4]
    bad = data.draw(st.lists(mutated_line(lines), min_size=1, max_size=4))
    mixed = lines[:2] + bad + lines[2:]
    loaded = read_jsonl(mixed)
    _check_loaded(loaded, mixed)
    plain = read_jsonl(mixed, fast=False)  # json only: the same verdicts as the msgspec path
    assert (plain.skipped, plain.problems) == (loaded.skipped, loaded.problems)
    assert [s.identity for s in plain.snapshots] == [s.identity for s in loaded.snapshots]
    page, result = build_report(loaded, max_charts=0)  # tables only: fast enough for many examples
    parse_html(page)
    assert result.charts == 0 and result.skipped == loaded.skipped


@pytest.mark.slow
@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzzed_snapshots_always_render_with_charts(valid_lines: dict[str, list[str]], data: st.DataObject) -> None:
    task = data.draw(st.sampled_from(sorted(valid_lines)))
    lines = valid_lines[task][:3]
    bad = data.draw(st.lists(mutated_line(lines), min_size=1, max_size=2))
    loaded = read_jsonl(lines[:1] + bad + lines[1:])
    page, result = build_report(loaded, alerts=["count>0"])
    doc = parse_html(page)
    assert result.charted == result.keys == len(sections(doc))
    assert "could not be drawn" not in page  # what the loader accepts, every chart can draw
