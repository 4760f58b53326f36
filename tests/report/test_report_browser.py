"""The report in a real browser: headless Chromium takes a screenshot of the page.

Skipped only when Chromium is absent *and* ``CI`` is unset; in CI (where ``.ci/run`` installs
Debian's ``chromium``) a missing browser fails the test. The screenshot is decoded and checked
for its size, for how much of it is ink (not page background), for colour variety, and for the
colours of things that only the inlined SVG charts draw (the ROC AUC line, the alert marks).
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import numpy as np
import pytest

from streammetrics import cli

if not os.environ.get("CI"):  # in CI the test extra must provide matplotlib: fail, do not skip
    pytest.importorskip("matplotlib", reason="the report needs matplotlib: pip install 'streammetrics[report]'")

from matplotlib.image import imread  # noqa: E402  (PNG decoding through Pillow)

WIDTH, HEIGHT = 1400, 2400
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars"]
AUC_BLUE = (0x00, 0x72, 0xB2)  # streammetrics.report.charts.COLORS["roc_auc"]
ALERT_RED = (0xD6, 0x27, 0x28)  # charts.ALERT_COLOR
HEADER_NAVY = (0x1D, 0x23, 0x30)  # page.CSS header background


def chromium_binary() -> str:
    """The Chromium executable; skip (locally) or fail (CI set) when there is none."""
    found = shutil.which("chromium") or (os.path.exists("/usr/bin/chromium") and "/usr/bin/chromium")
    if found:
        return found
    if os.environ.get("CI"):
        pytest.fail("chromium is not installed but CI is set: .ci/run must install Debian's chromium package")
    pytest.skip("chromium not installed (apt-get install chromium); set CI=1 to make this a failure")


def screenshot(html: Path, png: Path, profile: Path) -> subprocess.CompletedProcess:
    """Run headless Chromium on ``html``; kill its whole process group if it hangs."""
    cmd = [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
           f"--window-size={WIDTH},{HEIGHT}", html.resolve().as_uri()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"chromium did not finish within 120 s: {err[-2000:]}")
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def near(pixels: np.ndarray, rgb: tuple[int, int, int], tolerance: int = 12) -> int:
    """How many pixels are within ``tolerance`` (per channel, 0-255) of ``rgb``."""
    return int((np.abs(pixels.astype(np.int16) - np.array(rgb, dtype=np.int16)) <= tolerance).all(axis=-1).sum())


@pytest.fixture(scope="module")
def shot(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    binary = chromium_binary()
    assert binary
    tmp = tmp_path_factory.mktemp("browser")
    snaps, html, png = tmp / "sample.jsonl", tmp / "report.html", tmp / "report.png"
    assert cli.main(["replay", "--sample", "-q", "-o", str(snaps)]) == 0
    assert cli.main(["report", str(snaps), "-o", str(html), "--alert", "roc_auc<0.85"]) == 0
    result = screenshot(html, png, tmp / "profile")
    assert result.returncode == 0, result.stderr[-2000:]
    assert png.exists() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", result.stderr[-2000:]
    if os.environ.get("STREAMMETRICS_SCREENSHOT"):  # keep it for a human to look at
        shutil.copy(png, os.environ["STREAMMETRICS_SCREENSHOT"])
    image = imread(str(png))
    return (image[..., :3] * 255).round().astype(np.uint8)  # float RGB(A) in [0, 1] -> 8-bit RGB


def test_screenshot_has_the_window_size(shot: np.ndarray) -> None:
    assert shot.shape == (HEIGHT, WIDTH, 3)


def test_screenshot_is_not_blank(shot: np.ndarray) -> None:
    # thresholds: this page measures about 12% ink, 6% coloured, 430 colours; the same page with
    # its SVGs removed 5%, 0.2% and 130
    ink = (shot.min(axis=-1) < 200).mean()  # darker than the light page and card backgrounds
    assert ink > 0.08, f"only {ink:.1%} of the page has ink"
    coloured = (shot.max(axis=-1).astype(int) - shot.min(axis=-1) > 60).mean()  # saturated: charts, not text
    assert coloured > 0.01, f"only {coloured:.1%} of the page is coloured"
    quantised = {tuple(c) for c in (shot[::2, ::2] // 16).reshape(-1, 3)}
    assert len(quantised) > 200, f"only {len(quantised)} distinct colours"


def test_screenshot_shows_header_charts_and_alerts(shot: np.ndarray) -> None:
    assert near(shot[:60], HEADER_NAVY) > 0.5 * 60 * WIDTH  # the dark title bar on top
    assert near(shot, AUC_BLUE) > 2000  # ROC AUC lines and the ROC curves (whole period)
    assert near(shot, ALERT_RED, tolerance=20) > 200  # alert tags in the tables, rings and bounds in charts


PENDING_BLUE = (0x9E, 0xCA, 0xE1)  # charts.LABEL_STACK: predictions awaiting a label
EXPIRED_GREY = (0x99, 0x99, 0x99)  # charts.LABEL_STACK: expired predictions


@pytest.fixture(scope="module")
def delayed_shot(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    """The shipped delayed-label example in 1-minute windows, the last revisions of two windows left
    out (so that predictions still await labels): stacked label bars and the label-arrival chart."""
    tmp = tmp_path_factory.mktemp("browser-delayed")
    data = Path(cli.__file__).parent / "data"
    snaps, cut, html, png = tmp / "delayed.jsonl", tmp / "cut.jsonl", tmp / "delayed.html", tmp / "delayed.png"
    assert cli.main(["replay", str(data / "delayed_predictions.jsonl"), "--labels", str(data / "delayed_labels.jsonl"),
                     "--label-ttl", "15m", "--window", "1m", "-q", "-o", str(snaps)]) == 0
    lines = [json.loads(line) for line in snaps.read_text().splitlines()]
    starts = sorted({s["window"]["start"] for s in lines})[-3:-1]
    cut.write_text("".join(json.dumps(s) + "\n" for s in lines if s["window"]["start"] not in starts
                           or s["revision"] == 0))
    assert cli.main(["report", str(cut), "-o", str(html)]) == 0
    result = screenshot(html, png, tmp / "profile")
    assert result.returncode == 0 and png.exists(), result.stderr[-2000:]
    if os.environ.get("STREAMMETRICS_SCREENSHOT_DELAYED"):  # keep it for a human to look at
        shutil.copy(png, os.environ["STREAMMETRICS_SCREENSHOT_DELAYED"])
    return (imread(str(png))[..., :3] * 255).round().astype(np.uint8)


def test_delayed_labels_draw_stacked_bars_and_the_arrival_chart(shot: np.ndarray, delayed_shot: np.ndarray) -> None:
    # measured (1400x2400): pending blue 18,800 pixels here, 290 on the sample's page (no delayed
    # labels: antialiased edges of other colours); expired grey 7,000 vs 800 (text antialiasing);
    # blue 58,000 vs 4,600 (labelled bars and the arrival chart's dots besides the AUC lines)
    assert near(delayed_shot, PENDING_BLUE, tolerance=6) > max(5000, 10 * near(shot, PENDING_BLUE, tolerance=6))
    assert near(delayed_shot, EXPIRED_GREY, tolerance=4) > max(3000, 4 * near(shot, EXPIRED_GREY, tolerance=4))
    assert near(delayed_shot, AUC_BLUE) > 4 * near(shot, AUC_BLUE)


def test_missing_chromium_skips_locally_and_fails_in_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(os.path, "exists", lambda path: False)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="chromium not installed"):
        chromium_binary()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        chromium_binary()
