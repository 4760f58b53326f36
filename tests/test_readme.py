"""The README is a short front door whose commands, examples and links stay true."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def test_readme_opens_with_the_two_commands_ci_runs():
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[0].endswith("streammetrics demo") and '".[demo]"' in commands[0]
    assert "pytest" in commands[1] and '".[test]"' in commands[1]
    assert "awk" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_a_front_page():
    assert len(README.splitlines()) <= 200


def test_readme_library_example_runs():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    assert blocks
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_readme_links_resolve():
    for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README):
        if "://" not in target:
            assert (ROOT / target).exists(), target
