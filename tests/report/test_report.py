"""``streammetrics report``: structure of the HTML built from replayed snapshots, bad inputs.

Snapshots come from real replays (``streammetrics.cli.main(["replay", ...])``) of the shipped
sample and of small seeded multiclass/labels/regression streams; expected values are computed
independently from the snapshot JSON (and from the monitors rebuilt from its state), then
compared with what the page shows. The Kafka source is tested in tests/kafka/test_report_kafka.py,
the rendering in a real browser in tests/test_report_browser.py.
"""
from __future__ import annotations

import io
import json
import math
import os
import random
import re
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

import pytest

import streammetrics as sm
from streammetrics import cli
from streammetrics.stream.replay import sample_path

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from streammetrics.report import MissingDependency, build_report, write_report  # noqa: E402
from streammetrics.report.alerts import AlertRule, parse_rule  # noqa: E402
from streammetrics.report.history import Change, group_by_key, non_overlapping  # noqa: E402
from streammetrics.report.page import format_delta, format_value  # noqa: E402
from streammetrics.report.sources import from_dicts, parse_kafka_url, read_jsonl  # noqa: E402

BINARY_CHARTS = {"quality", "loss", "count", "roc", "pr", "confusion"}
MUST_FIRE, CANNOT_FIRE = "roc_auc<0.85", "roc_auc<0"


# ---------------------------------------------------------------------- a tiny DOM
class Node:
    """An HTML/SVG element: tag, attributes, children, text."""

    def __init__(self, tag: str, attrs: dict[str, str], parent: "Node | None") -> None:
        self.tag, self.attrs, self.parent = tag, attrs, parent
        self.children: list[Node] = []
        self.text_parts: list[str] = []

    def iter(self) -> Iterator["Node"]:
        yield self
        for child in self.children:
            yield from child.iter()

    def find_all(self, tag: str | None = None, **attrs: str) -> list["Node"]:
        """Descendants with ``tag`` whose attributes contain ``attrs`` (``class_`` matches one class)."""
        out = []
        for node in self.iter():
            if node is self or (tag is not None and node.tag != tag):
                continue
            ok = True
            for name, value in attrs.items():
                if name == "class_":
                    ok = value in node.attrs.get("class", "").split()
                else:
                    ok = node.attrs.get(name.replace("_", "-")) == value
                if not ok:
                    break
            if ok:
                out.append(node)
        return out

    def find(self, tag: str | None = None, **attrs: str) -> "Node":
        found = self.find_all(tag, **attrs)
        assert found, f"no <{tag} {attrs}> in <{self.tag} {self.attrs}>"
        return found[0]

    @property
    def text(self) -> str:
        return "".join(n_text for node in self.iter() for n_text in node.text_parts)

    def texts(self, tag: str) -> list[str]:
        return [n.text for n in self.find_all(tag)]


class _TreeBuilder(HTMLParser):
    VOID = {"meta", "br", "img", "link", "input", "hr"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#document", {}, None)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs}, self.current)
        self.current.children.append(node)
        if tag not in self.VOID:
            self.current = node

    def handle_startendtag(self, tag: str, attrs: list) -> None:
        self.current.children.append(Node(tag, {k: v or "" for k, v in attrs}, self.current))

    def handle_endtag(self, tag: str) -> None:
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        assert node is not None and node.parent is not None, f"unbalanced </{tag}>"
        self.current = node.parent

    def handle_data(self, data: str) -> None:
        self.current.text_parts.append(data)


def parse_html(text: str) -> Node:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    assert builder.current is builder.root, "unclosed elements"
    return builder.root


# ---------------------------------------------------------------------- inputs
def replay(tmp: Path, name: str, *args: str) -> Path:
    out = tmp / f"{name}.jsonl"
    assert cli.main(["replay", *args, "-q", "-o", str(out)]) == 0
    return out


def load_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def write_events(path: Path, events: list[dict]) -> Path:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    return path


def multiclass_events(n: int = 480) -> list[dict]:
    """A classifier of three classes whose scores lose their signal over 8 minutes."""
    rng = random.Random(11)
    classes = ["cat", "dog", "bird"]
    events = []
    for i in range(n):
        y = rng.choice(classes)
        raw = [rng.random() for _ in classes]
        raw[classes.index(y)] += 1.2 * (1 - i / n)
        total = sum(raw)
        events.append({"ts": 1767225600 + i, "model": "animals", "segment": "eu", "y_true": y,
                       "scores": {c: v / total for c, v in zip(classes, raw)}})
    return events


def label_events(n: int = 300) -> list[dict]:
    rng = random.Random(12)
    events = []
    for i in range(n):
        y = rng.choice(["spam", "ham", "promo"])
        p = y if rng.random() < 0.85 else rng.choice(["spam", "ham", "promo"])
        events.append({"ts": 1767225600 + i, "model": "tagger", "y_true": y, "y_pred": p})
    return events


def regression_events(n: int = 300) -> list[dict]:
    rng = random.Random(13)
    events = []
    for i in range(n):
        y = rng.gauss(20, 5)
        events.append({"ts": 1767225600 + i, "model": "eta", "segment": "city", "y_true": y,
                       "y_pred": y + rng.gauss(0, 1 + i / 100)})
    return events


# ---------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("report")


@pytest.fixture(scope="module")
def sample(workdir: Path) -> Path:
    return replay(workdir, "sample", "--sample")


@pytest.fixture(scope="module")
def sample_report(workdir: Path, sample: Path) -> Node:
    out = workdir / "sample.html"
    assert cli.main(["report", str(sample), "-o", str(out), "--alert", MUST_FIRE, "--alert", CANNOT_FIRE,
                     "--title", "Fraud <models>"]) == 0
    return parse_html(out.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def mixed(workdir: Path) -> tuple[Path, Node]:
    """One file with snapshots of all four tasks, and its report."""
    parts = [
        replay(workdir, "mc", str(write_events(workdir / "mc-events.jsonl", multiclass_events())),
               "--task", "multiclass", "--classes", "cat,dog,bird"),
        replay(workdir, "lab", str(write_events(workdir / "lab-events.jsonl", label_events())), "--task", "labels"),
        replay(workdir, "reg", str(write_events(workdir / "reg-events.jsonl", regression_events())),
               "--task", "regression"),
        replay(workdir, "bin", "--sample"),
    ]
    combined = workdir / "mixed.jsonl"
    combined.write_text("".join(p.read_text() for p in parts))
    out = workdir / "mixed.html"
    assert cli.main(["report", str(combined), "-o", str(out), "--alert", "accuracy<0.8"]) == 0
    return combined, parse_html(out.read_text(encoding="utf-8"))


def sections(doc: Node) -> dict[tuple[str, str], Node]:
    return {(s.attrs["data-model"], s.attrs["data-segment"]): s for s in doc.find_all("section", class_="key")}


def charts(section: Node) -> dict[str, Node]:
    figures = section.find_all("figure", class_="chart")
    kinds = [f.attrs["data-chart"] for f in figures]
    assert len(kinds) == len(set(kinds)), kinds
    return dict(zip(kinds, figures))


def by_key(snapshots: list[dict]) -> dict[tuple[str, str], list[dict]]:
    out: dict[tuple[str, str], list[dict]] = {}
    for s in snapshots:
        out.setdefault((s["key"]["model"], s["key"]["segment"]), []).append(s)
    for windows in out.values():
        windows.sort(key=lambda s: s["window"]["start"])
    return out


# ---------------------------------------------------------------------- structure
def test_one_section_per_key(sample: Path, sample_report: Node) -> None:
    expected = set(by_key(load_lines(sample)))
    assert len(expected) == 3
    found = sections(sample_report)
    assert set(found) == expected
    assert {s.attrs["data-task"] for s in found.values()} == {"binary"}
    ids = [s.attrs["id"] for s in found.values()]
    assert len(set(ids)) == 3 and all(i.startswith("key-") for i in ids)


def test_every_binary_chart_is_an_inline_svg_with_its_title(sample_report: Node) -> None:
    titles = {"quality": "Ranking and classification quality per window", "roc": "ROC curve",
              "pr": "Precision-recall curve", "confusion": "Confusion matrix, latest window",
              "count": "Events per window", "loss": "Probabilistic loss per window (lower is better)"}
    for key, section in sections(sample_report).items():
        found = charts(section)
        assert set(found) == BINARY_CHARTS, key
        assert len(section.find_all("svg")) == len(BINARY_CHARTS)
        for kind, figure in found.items():
            assert figure.attrs["id"] == f"{section.attrs['id']}-{kind}"
            svg = figure.find_all("svg")
            assert len(svg) == 1
            assert svg[0].attrs["aria-label"] == titles[kind] == figure.attrs["title"]
            assert titles[kind] in svg[0].texts("text")  # drawn in the chart itself
            assert len(svg[0].find_all("path")) > 5


def test_page_is_self_contained(workdir: Path, sample_report: Node) -> None:
    text = (workdir / "sample.html").read_text(encoding="utf-8")
    assert not sample_report.find_all("script") and not sample_report.find_all("link")
    for node in sample_report.iter():
        for name in ("href", "src", "xlink:href"):
            value = node.attrs.get(name)
            if value is not None:
                assert value.startswith(("#", "data:")), (node.tag, name, value[:80])
    assert "@import" not in text and "url(http" not in text
    ids = [n.attrs["id"] for n in sample_report.iter() if "id" in n.attrs]
    assert len(ids) == len(set(ids)), "duplicate ids between inlined SVGs"
    referenced = set(re.findall(r'url\(#([^)]+)\)', text)) | set(re.findall(r'href="#([^"]+)"', text))
    assert referenced <= set(ids)


def test_title_is_escaped(sample_report: Node) -> None:
    assert sample_report.find("h1").text == "Fraud <models>"
    assert sample_report.find("title").text == "Fraud <models>"


def test_summary_rows_show_latest_values_and_changes(sample: Path, sample_report: Node) -> None:
    expected = by_key(load_lines(sample))
    table = sample_report.find("table", class_="summary", data_task="binary")
    rows = table.find("tbody").find_all("tr")
    keys = [r.attrs["data-key"] for r in rows]
    assert sorted(keys) == [f"{m}|{s}" for m, s in sorted(expected)]
    alerts = [int(r.attrs["data-alerts"]) for r in rows]
    assert alerts == sorted(alerts, reverse=True) and alerts[0] > 0  # keys with alerts first
    quiet = [k for k, n in zip(keys, alerts) if n == 0]
    assert quiet == sorted(quiet)  # then the others by name
    seen_verdicts = set()
    for row in rows:
        model, segment = row.attrs["data-key"].split("|")
        windows = expected[(model, segment)]
        latest, previous = windows[-1]["metrics"], windows[-2]["metrics"]
        assert row.find_all("td")[1].text == str(len(windows))
        for metric in ("roc_auc", "f1", "precision", "recall", "accuracy", "log_loss", "brier_score", "count"):
            cell = row.find("td", data_metric=metric)
            assert cell.find("span", class_="v").text == format_value(latest[metric], metric)
            delta_span = cell.find("span", class_="d")
            delta = latest[metric] - previous[metric]
            verdict = delta_span.attrs["class"].split()[1]
            if metric == "count":
                assert verdict in ("changed", "same")
                continue
            better = delta > 0 if metric not in ("log_loss", "brier_score") else delta < 0
            if verdict != "same":
                assert verdict == ("better" if better else "worse"), (row.attrs["data-key"], metric, delta)
                assert delta_span.text.startswith("▲" if delta > 0 else "▼")
            seen_verdicts.add(verdict)
    assert {"better", "worse"} <= seen_verdicts


def test_alerts_listed_for_the_rule_that_fires_and_none_for_the_one_that_cannot(sample: Path,
                                                                                sample_report: Node) -> None:
    expected: dict[str, list[float]] = {}
    for (model, segment), windows in by_key(load_lines(sample)).items():
        hits = [w["window"]["start"] for w in windows
                if w["metrics"]["roc_auc"] is not None and w["metrics"]["roc_auc"] < 0.85]
        if hits:
            expected[f"{model}|{segment}"] = hits
    assert expected, "the drifting sample must fall below ROC AUC 0.85 somewhere"
    alert_rows = sample_report.find("table", class_="alerts").find("tbody").find_all("tr")
    assert {r.attrs["data-rule"] for r in alert_rows} == {MUST_FIRE}
    assert {r.attrs["data-key"]: int(r.find_all("td")[2].text) for r in alert_rows} == \
        {k: len(v) for k, v in expected.items()}
    for row in sample_report.find("table", class_="summary").find("tbody").find_all("tr"):
        key = row.attrs["data-key"]
        assert int(row.attrs["data-alerts"]) == len(expected.get(key, []))
        cell = row.find("td", class_="alerts")
        assert (MUST_FIRE in cell.text) == (key in expected)
        assert CANNOT_FIRE + " " not in cell.text and "roc_auc<0 " not in cell.text
    # the alerted windows are marked on the quality chart (rule legend + ringed points)
    for (model, segment), section in sections(sample_report).items():
        legend = charts(section)["quality"].find("svg").texts("text")
        assert (f"alert {MUST_FIRE}" in legend) == (f"{model}|{segment}" in expected)
        assert f"alert {CANNOT_FIRE}" not in legend


def first_windows(sample: Path, tmp: Path, n: int = 9) -> Path:
    """The sample's first ``n`` snapshots (3 per key): a smaller, faster report."""
    path = tmp / f"first-{n}.jsonl"
    path.write_text("".join(sample.read_text().splitlines(keepends=True)[:n]))
    return path


def test_rule_that_cannot_fire_reports_no_alerts(workdir: Path, sample: Path) -> None:
    out = workdir / "quiet.html"
    assert cli.main(["report", str(first_windows(sample, workdir)), "-o", str(out), "--alert", "log_loss>100"]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert doc.find("p", id="no-alerts").text == "No rule fired in any window."
    assert not doc.find_all("table", class_="alerts")
    assert all(td.text == "none" for td in doc.find_all("td", class_="alerts"))


def test_curves_are_rebuilt_from_state_latest_and_whole_period(sample: Path, sample_report: Node) -> None:
    for (model, segment), windows in by_key(load_lines(sample)).items():
        merged = sm.from_dict(windows[0]["state"])
        for w in windows[1:]:
            merged.merge(sm.from_dict(w["state"]))
        whole_auc = merged.scores.roc_auc()
        latest = windows[-1]
        section = sections(sample_report)[(model, segment)]
        legend = charts(section)["roc"].find("svg").texts("text")
        assert f"whole period ({len(windows)} windows), AUC {whole_auc:.3f}" in legend
        assert f"latest window, AUC {latest['metrics']['roc_auc']:.3f}" in legend
        pr_legend = charts(section)["pr"].find("svg").texts("text")
        assert f"whole period ({len(windows)} windows), AP {merged.scores.average_precision():.3f}" in pr_legend
        assert f"latest window, AP {latest['metrics']['average_precision']:.3f}" in pr_legend
        # confusion heatmap: the latest window's counts, rows true / columns predicted
        matrix = sm.from_dict(latest["state"]).confusion.matrix([0, 1])
        cells = [t for t in charts(section)["confusion"].find("svg").texts("text") if t.isdigit()]
        assert cells == [str(int(v)) for v in matrix.ravel()]


def test_quality_chart_has_the_auc_bounds_band(sample_report: Node) -> None:
    for section in sections(sample_report).values():
        figure = charts(section)["quality"]
        assert "ROC AUC guaranteed bounds" in figure.find("svg").texts("text")
        assert "guaranteed bounds (widest" in figure.find("figcaption").text


def test_no_state_report_draws_the_metrics_and_says_curves_need_state(workdir: Path) -> None:
    snaps = replay(workdir, "nostate", "--sample", "--no-state")
    assert all("state" not in s for s in load_lines(snaps))
    out = workdir / "nostate.html"
    assert cli.main(["report", str(snaps), "-o", str(out), "--alert", MUST_FIRE]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert len(sections(doc)) == 3
    for section in sections(doc).values():
        assert set(charts(section)) == {"quality", "loss", "count"}
        note = section.find("p", class_="note").text
        assert "no monitor state" in note and "--no-state" in note
    assert doc.find("table", class_="alerts").find_all("tr", class_="alert")


# ---------------------------------------------------------------------- other tasks
def test_multiclass_labels_and_regression_sections(mixed: tuple[Path, Node]) -> None:
    _, doc = mixed
    found = sections(doc)
    assert {k: s.attrs["data-task"] for k, s in found.items()} == {
        ("animals", "eu"): "multiclass", ("tagger", ""): "labels", ("eta", "city"): "regression",
        ("fraud-v1", "web"): "binary", ("fraud-v2", "web"): "binary", ("fraud-v2", "mobile"): "binary",
    }
    assert set(charts(found[("animals", "eu")])) == {"quality", "class-recall", "class-precision", "loss", "count",
                                                     "confusion"}
    assert set(charts(found[("tagger", "")])) == {"quality", "class-recall", "class-precision", "count", "confusion"}
    assert set(charts(found[("eta", "city")])) == {"errors", "r2", "count"}
    recall = charts(found[("animals", "eu")])["class-recall"].find("svg").texts("text")
    assert {"cat", "dog", "bird"} <= set(recall) and "Per-class recall over time" in recall
    precision = charts(found[("tagger", "")])["class-precision"].find("svg").texts("text")
    assert {"spam", "ham", "promo"} <= set(precision)
    errors = charts(found[("eta", "city")])["errors"].find("svg").texts("text")
    assert {"RMSE", "MAE", "max error"} <= set(errors)
    # summary: one table per task, in a fixed order, a row per key
    tables = doc.find("section", id="summary").find_all("table", class_="summary")
    assert [t.attrs["data-task"] for t in tables] == ["binary", "multiclass", "labels", "regression"]
    assert [len(t.find("tbody").find_all("tr")) for t in tables] == [3, 1, 1, 1]
    regression = tables[3].find("tbody").find("tr")
    assert {td.attrs.get("data-metric") for td in regression.find_all("td")} >= {"rmse", "mae", "mse", "r2"}
    # lower is better for errors: the error column's verdict follows the sign of the change
    rmse = regression.find("td", data_metric="rmse").find("span", class_="d")
    assert rmse.attrs["class"].split()[1] in ("better", "worse", "same")


def test_multiclass_confusion_matrix_is_the_latest_windows(mixed: tuple[Path, Node]) -> None:
    combined, doc = mixed
    latest = by_key(load_lines(combined))[("animals", "eu")][-1]
    monitor = sm.from_dict(latest["state"])
    matrix = monitor.scores.confusion().matrix(["cat", "dog", "bird"])
    svg = charts(sections(doc)[("animals", "eu")])["confusion"].find("svg")
    assert [t for t in svg.texts("text") if t.isdigit()] == [str(int(v)) for v in matrix.ravel()]


def test_multiclass_drift_fires_accuracy_alerts(mixed: tuple[Path, Node]) -> None:
    combined, doc = mixed
    windows = by_key(load_lines(combined))[("animals", "eu")]
    expected = sum(1 for w in windows if w["metrics"]["accuracy"] < 0.8)
    assert expected > 0
    row = doc.find("table", class_="alerts").find("tr", data_key="animals|eu")
    assert int(row.find_all("td")[2].text) == expected


# ---------------------------------------------------------------------- sources and API
def test_hopping_windows_merge_only_non_overlapping_windows_for_the_whole_period(workdir: Path) -> None:
    snaps = load_lines(replay(workdir, "hop", "--sample", "--window", "2m", "--slide", "30s"))
    events = [json.loads(line) for line in Path(sample_path()).read_text().splitlines()]
    for history in group_by_key(from_dicts(snaps).snapshots):
        kept = non_overlapping(history.windows)
        assert all(b.start >= a.end for a, b in zip(kept, kept[1:]))
        monitor, used = history.period
        assert used == len(kept) < len(history.windows)
        expected = sum(1 for e in events if (e["model"], e["segment"]) == history.key)
        assert monitor.count == history.total_events() == expected


def test_duplicate_windows_are_kept_once(workdir: Path, sample: Path) -> None:
    doubled = workdir / "doubled.jsonl"
    doubled.write_text(sample.read_text() * 2)
    loaded = read_jsonl(doubled.read_text().splitlines(keepends=True))
    assert loaded.duplicates == len(load_lines(sample)) == len(loaded.snapshots)


def test_cumulative_snapshots_are_not_charted_as_windows(workdir: Path) -> None:
    snaps = load_lines(replay(workdir, "cumulative", "--sample", "--cumulative"))
    histories = group_by_key(from_dicts(snaps).snapshots)
    assert [len(h.windows) for h in histories] == [15, 15, 15]
    assert all(len(h.cumulative) == 15 for h in histories)


def test_write_report_keeps_the_demo_signature(workdir: Path, sample: Path) -> None:
    snapshots = load_lines(sample) + [{"schema": "something/else"}]
    out = workdir / "demo.html"
    result = write_report(snapshots, str(out))
    assert result.path == str(out) and result.keys == 3 and result.windows == 45 and result.skipped == 1
    assert result.charts == 18 and result.alerts == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert len(sections(doc)) == 3
    assert "1 malformed snapshot skipped" in doc.find("header").text


def test_build_report_rejects_empty_input() -> None:
    with pytest.raises(ValueError, match="no snapshots"):
        build_report([])


def test_stdin_source(monkeypatch: pytest.MonkeyPatch, workdir: Path, sample: Path) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(first_windows(sample, workdir).read_text()))
    out = workdir / "stdin.html"
    assert cli.main(["report", "-", "-o", str(out)]) == 0
    assert len(sections(parse_html(out.read_text(encoding="utf-8")))) == 3


# ---------------------------------------------------------------------- bad inputs
def test_missing_matplotlib_says_how_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture,
                                                workdir: Path, sample: Path) -> None:
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # makes `import matplotlib` raise ImportError
    out = workdir / "never.html"
    assert cli.main(["report", str(sample), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'streammetrics[report]'" in err and "matplotlib" in err
    assert not out.exists()
    with pytest.raises(MissingDependency, match=r"streammetrics\[report\]"):
        write_report(load_lines(sample), str(out))
    assert issubclass(MissingDependency, ImportError)


def run_cli(capsys: pytest.CaptureFixture, *args: str) -> tuple[int, str]:
    code = cli.main(["report", *args])
    return code, capsys.readouterr().err


def test_unreadable_and_empty_sources(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    code, err = run_cli(capsys, str(tmp_path / "missing.jsonl"), "-o", str(out))
    assert code == 1 and "cannot read" in err and "missing.jsonl" in err
    code, err = run_cli(capsys, str(tmp_path), "-o", str(out))  # a directory
    assert code == 1 and "cannot read" in err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    code, err = run_cli(capsys, str(empty), "-o", str(out))
    assert code == 1 and "no snapshots in" in err
    garbage = tmp_path / "garbage.jsonl"
    garbage.write_text("nope\n[1, 2]\n")
    code, err = run_cli(capsys, str(garbage), "-o", str(out))
    assert code == 1 and "every line was malformed" in err and "skipped 2 malformed" in err
    assert not out.exists()


def test_malformed_lines_are_skipped_with_a_count(capsys: pytest.CaptureFixture, tmp_path: Path,
                                                  sample: Path) -> None:
    lines = first_windows(sample, tmp_path).read_text().splitlines()
    first = json.loads(lines[0])
    backwards = {**first, "window": {"start": 10, "end": 5}}
    bad = ["{not json", json.dumps({"schema": "other/1"}), "[1, 2, 3]", json.dumps(backwards),
           json.dumps({**first, "metrics": None})]
    mixed = lines[:5] + bad + lines[5:]
    source = tmp_path / "mixed.jsonl"
    source.write_text("\n".join(mixed) + "\n")
    out = tmp_path / "r.html"
    code, err = run_cli(capsys, str(source), "-o", str(out))
    assert code == 0
    assert "skipped 5 malformed snapshots" in err
    for lineno, reason in [(6, "not JSON"), (7, "not a snapshot"), (8, "expected a snapshot object"),
                           (9, "window end 5 is not after its start 10"), (10, "metrics must be an object")]:
        assert f"line {lineno}: {reason}" in err
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert len(sections(doc)) == 3
    assert "5 malformed snapshots skipped" in doc.find("header").text


@pytest.mark.parametrize("rule", ["roc_auc<<0.8", "roc_auc", "0.8>roc_auc", "roc_auc<abc", "roc auc<0.8", ""])
def test_bad_alert_rule_is_named(capsys: pytest.CaptureFixture, tmp_path: Path, sample: Path, rule: str) -> None:
    out = tmp_path / "r.html"
    code, err = run_cli(capsys, str(sample), "-o", str(out), "--alert", "f1<0.5", "--alert", rule)
    assert code == 2
    assert f"bad --alert rule {rule!r}" in err and "METRIC<VALUE" in err
    assert not out.exists()


def test_unknown_metric_lists_the_known_ones(capsys: pytest.CaptureFixture, tmp_path: Path, sample: Path) -> None:
    code, err = run_cli(capsys, str(sample), "-o", str(tmp_path / "r.html"), "--alert", "auc<0.8")
    assert code == 2
    assert "unknown metric 'auc' in --alert rule 'auc<0.8'" in err
    known = err.split("known metrics:")[1]
    assert {"roc_auc", "log_loss", "f1", "brier_score"} <= {m.strip() for m in known.split(",")}
    assert "per_class" not in known


def test_bad_kafka_url_and_unwritable_output(capsys: pytest.CaptureFixture, tmp_path: Path, sample: Path) -> None:
    code, err = run_cli(capsys, "kafka://localhost:9092", "-o", str(tmp_path / "r.html"))
    assert code == 2 and "expected kafka://HOST:PORT/TOPIC" in err
    code, err = run_cli(capsys, str(sample), "-o", str(tmp_path / "no-such-dir" / "r.html"))
    assert code == 1 and "cannot write" in err


# ---------------------------------------------------------------------- units
@pytest.mark.parametrize("text, metric, op, threshold", [
    ("roc_auc<0.8", "roc_auc", "<", 0.8), (" log_loss > .5 ", "log_loss", ">", 0.5),
    ("mse>=1e3", "mse", ">=", 1000.0), ("r2<=-0.25", "r2", "<=", -0.25),
])
def test_parse_rule(text: str, metric: str, op: str, threshold: float) -> None:
    rule = parse_rule(text)
    assert (rule.metric, rule.op, rule.threshold) == (metric, op, threshold)


def test_rules_fire_strictly_and_never_on_undefined_values() -> None:
    below = parse_rule("roc_auc<0.8")
    assert below.fires(0.79) and not below.fires(0.8) and not below.fires(None) and not below.fires(math.nan)
    above = AlertRule("log_loss", ">=", 0.5, "log_loss>=0.5")
    assert above.fires(0.5) and not above.fires(0.49)


def test_change_verdicts_follow_the_metric_direction() -> None:
    assert Change("roc_auc", 0.9, 0.8).verdict() == "better"
    assert Change("log_loss", 0.9, 0.8).verdict() == "worse"
    assert Change("rmse", 1.0, 2.0).verdict() == "better"
    assert Change("count", 10, 20).verdict() == "changed"
    assert Change("f1", 0.5, None).verdict() == "n/a"
    assert format_delta(Change("log_loss", 0.3, 0.5)) == ("▼ −0.200", "better")
    assert format_delta(Change("f1", 0.5, 0.50001)) == ("= 0", "same")
    assert format_delta(Change("f1", None, 0.5)) == ("–", "n-a")


def test_kafka_url() -> None:
    assert parse_kafka_url("kafka://a:1,b:2/snaps") == ("a:1,b:2", "snaps")
    for bad in ("kafka://a:1/", "kafka:///t", "kafka://a:1/t/x", "http://a:1/t"):
        with pytest.raises(ValueError):
            parse_kafka_url(bad)


def test_malformed_state_is_a_note_not_a_crash(sample: Path) -> None:
    snaps = load_lines(sample)
    snaps[-1] = {**snaps[-1], "state": {"type": "BinaryMonitor", "version": 1, "config": {}, "state": {}}}
    page, result = build_report(from_dicts(snaps))
    assert result.keys == 3
    broken = (snaps[-1]["key"]["model"], snaps[-1]["key"]["segment"])
    section = sections(parse_html(page))[broken]
    assert "unusable state" in section.text
    assert {"roc", "pr"} <= set(charts(section))  # the whole period still has the other windows
    assert "confusion" not in charts(section)


def test_rolling_mean_ignores_gaps() -> None:
    from streammetrics.report.charts import rolling_mean, smoothing_span

    out = rolling_mean([1.0, 2.0, 3.0, math.nan, 5.0, math.nan, math.nan, math.nan], 3)
    assert out[:4].tolist() == [1.5, 2.0, 2.5, 4.0]  # each the mean of the defined neighbours
    assert math.isnan(out[4]) and math.isnan(out[6])  # fewer than half of the span defined
    assert smoothing_span(150) == 1 and smoothing_span(1440) == 24


def test_window_ranges_join_adjacent_windows(sample: Path) -> None:
    from streammetrics.report.page import window_ranges

    windows = group_by_key(from_dicts(load_lines(sample)).snapshots)[0].windows
    picked = [windows[i] for i in (0, 1, 2, 5, 7, 8)]
    start = windows[0].start
    assert [(a - start, b - start) for a, b in window_ranges(picked)] == [(0, 180), (300, 360), (420, 540)]


def test_many_windows_are_smoothed_and_alert_times_compressed(tmp_path: Path) -> None:
    from streammetrics.stream.synthetic import DriftingModel, generate_events

    model = DriftingModel("long", "run", base_rate=0.3, separation=(3.0, 1.0))
    events = write_events(tmp_path / "long-events.jsonl",
                          list(generate_events(4000, duration=200 * 60, models=(model,))))
    snaps = replay(tmp_path, "long", str(events))
    windows = load_lines(snaps)
    assert len(windows) == 200
    out = tmp_path / "long.html"
    assert cli.main(["report", str(snaps), "-o", str(out), "--alert", "roc_auc<0.8"]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    quality = charts(sections(doc)[("long", "run")])["quality"]
    assert "rolling mean over 3 windows" in quality.find("figcaption").text
    row = doc.find("table", class_="alerts").find("tr", data_key="long|run")
    fired = [w for w in windows if w["metrics"]["roc_auc"] is not None and w["metrics"]["roc_auc"] < 0.8]
    assert int(row.find_all("td")[2].text) == len(fired) > 12
    when = row.find_all("td")[4].text
    assert "–" in when and ("more)" in when or when.count(",") < len(fired) - 1)
