"""The documentation site builds in strict mode, its CLI page is current, and the getting-started
pages' code runs as written (in a fresh directory, block after block, as a reader would)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
sys.path.insert(0, str(DOCS))
import generate_cli  # noqa: E402


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return env


@pytest.mark.slow
def test_site_builds_in_strict_mode(tmp_path):
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    if mkdocs is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not installed (the docs extra is in the test extra)")
        pytest.skip("mkdocs is not installed")
    result = subprocess.run([mkdocs, "build", "--strict", "-q", "-d", str(tmp_path / "site")], cwd=ROOT,
                            capture_output=True, text=True, env={**_env(), "NO_MKDOCS_2_WARNING": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "getting-started" / "files" / "index.html").exists()


def test_cli_reference_is_current():
    page = (DOCS / "reference" / "cli.md").read_text()
    assert page == generate_cli.render(), "docs/reference/cli.md is stale: run python docs/generate_cli.py"


def _blocks(page: Path) -> list[tuple[str, str]]:
    return re.findall(r"```(python|bash)\n(.*?)```", page.read_text(), re.S)


def test_getting_started_pages_have_code():
    for page in sorted((DOCS / "getting-started").glob("*.md")):
        assert _blocks(page), page


@pytest.mark.slow
@pytest.mark.parametrize("name", ["library", "files", pytest.param("service", marks=pytest.mark.kafka)])
def test_getting_started_page_runs(name, tmp_path, monkeypatch):
    page = DOCS / "getting-started" / f"{name}.md"
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__main__"}
    for kind, code in _blocks(page):
        if kind == "python":
            exec(compile(code, str(page), "exec"), namespace)
        else:
            result = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=tmp_path, env=_env(),
                                    capture_output=True, text=True, timeout=300)
            assert result.returncode == 0, f"{page.name}:\n{code}\n{result.stdout}\n{result.stderr}"
