"""``streammetrics report`` on 5,000 keys: every key in the summary table, charts within
``--max-charts`` for the keys chosen by alerts, worst headline metric and volume (counts of
charts and rows here; the time is measured by benchmarks/bench_report.py)."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from streammetrics import cli

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from test_report import parse_html, sections  # noqa: E402

from streammetrics.report import DEFAULT_MAX_CHARTS  # noqa: E402
from streammetrics.report.alerts import evaluate, parse_rules  # noqa: E402
from streammetrics.report.charts import max_charts_of  # noqa: E402
from streammetrics.report.history import group_by_key  # noqa: E402
from streammetrics.report.select import choose_charted  # noqa: E402
from streammetrics.report.sources import from_dicts  # noqa: E402
from streammetrics.stream.snapshots import snapshot_line  # noqa: E402

KEYS = 5000
START = 1_767_225_600
ALERTED = {"m0017": 2, "m4242": 1}  # alerted windows per model (roc_auc < 0.6)
WORST, LARGEST = "m3000", "m1234"


def fleet() -> list[dict]:
    """Two windows per key, metrics only (no state): quality varies by key, a few stand out."""
    snaps = []
    for k in range(KEYS):
        model = f"m{k:04d}"
        for w in range(2):
            auc = 0.7 + 0.25 * ((k * 7919 + w * 31) % 1000) / 1000
            if model in ALERTED and w >= 2 - ALERTED[model]:
                auc = 0.55
            if model == WORST and w == 1:
                auc = 0.61  # the lowest latest ROC AUC that does not fire the rule
            count = 1_000_000 if model == LARGEST else 100 + k % 50
            snaps.append({"schema": "streammetrics.snapshot/1", "key": {"model": model, "segment": "eu"},
                          "window": {"start": START + 60 * w, "end": START + 60 * (w + 1)}, "final": True,
                          "count": count, "late": 0,
                          "metrics": {"count": count, "roc_auc": auc, "roc_auc_low": auc, "roc_auc_high": auc,
                                      "f1": auc - 0.1, "accuracy": auc, "log_loss": 1 - auc, "brier_score": 0.1}})
    return snaps


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scale") / "fleet.jsonl"
    path.write_text("".join(snapshot_line(s) + "\n" for s in fleet()))
    return path


def test_5000_keys_render_with_at_most_max_charts_for_the_keys_that_matter(source: Path, tmp_path: Path,
                                                                         capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "r.html"
    assert cli.main(["report", str(source), "-o", str(out), "--alert", "roc_auc<0.6", "--max-charts", "12"]) == 0
    assert "5000 keys, 10000 windows, 12 charts for 4 keys" in capsys.readouterr().out
    doc = parse_html(out.read_text(encoding="utf-8"))
    figures = doc.find_all("figure", class_="chart")
    assert len(figures) == 12  # 4 keys x 3 charts (no state: no curves or confusion matrix)
    assert len(doc.find("table", class_="summary").find_all("tr", data_charted="0")) == KEYS - 4
    charted = {model for model, _ in sections(doc)}
    # round 1: most alerted, lowest ROC AUC, most events; round 2: the other alerted key
    assert charted == {"m0017", WORST, LARGEST, "m4242"}
    note = doc.find("p", id="charted-keys").text
    assert "Charts for 4 of 5,000 keys (12 charts; at most 12" in note and "most events" in note
    listed = doc.find("ul", class_="charted").find_all("a")
    assert {a.text for a in listed} == {f"{m} / eu" for m in charted}
    assert {a.attrs["href"][1:] for a in listed} == {s.attrs["id"] for s in sections(doc).values()}
    why = {m: s.find("p", class_="why").text for (m, _), s in sections(doc).items()}
    assert why["m0017"] == "Charted: alerts fired in 2 windows"
    assert why[WORST] == "Charted: #3 lowest latest roc_auc (0.61)"  # after the two alerted keys (0.55)
    assert why[LARGEST] == "Charted: #1 most events (2,000,000)"


def test_default_budget_on_5000_keys_counts_charts_not_time() -> None:
    histories = group_by_key(from_dicts(fleet()).snapshots)
    rules = parse_rules(["roc_auc<0.6"])
    for h in histories:
        h.alerts = evaluate(rules, h.windows)
    selection = choose_charted(histories, DEFAULT_MAX_CHARTS, max_charts_of)
    chosen = [h for h in histories if selection.charted(h)]
    used = sum(max_charts_of(h) for h in chosen)
    assert DEFAULT_MAX_CHARTS - 3 < used <= DEFAULT_MAX_CHARTS and len(chosen) == DEFAULT_MAX_CHARTS // 3
    assert not selection.all_keys and {"m0017", "m4242", WORST, LARGEST} <= {h.model for h in chosen}


def test_every_key_is_charted_when_they_fit_and_none_with_a_zero_budget(source: Path, tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture) -> None:
    small = tmp_path / "small.jsonl"
    small.write_text("".join(source.read_text().splitlines(keepends=True)[:8]))  # 4 keys, 12 charts
    out = tmp_path / "r.html"
    assert cli.main(["report", str(small), "-o", str(out), "--max-charts", "12"]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert len(sections(doc)) == 4 and not doc.find_all("p", id="charted-keys")
    assert cli.main(["report", str(small), "-o", str(out), "--max-charts", "0"]) == 0
    doc = parse_html(out.read_text(encoding="utf-8"))
    assert not sections(doc) and len(doc.find("table", class_="summary").find_all("tr", data_charted="0")) == 4
    capsys.readouterr()
    assert cli.main(["report", str(small), "-o", str(out), "--max-charts", "-1"]) == 2
    assert "--max-charts must be 0 or more" in capsys.readouterr().err


def test_cli_help_states_the_default_budget(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        cli.main(["report", "--help"])
    assert f"(default {DEFAULT_MAX_CHARTS})" in " ".join(capsys.readouterr().out.split())
