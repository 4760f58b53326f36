"""The README's first command lines and library examples stay true."""
from __future__ import annotations

import re
from pathlib import Path

README = (Path(__file__).resolve().parents[1] / "README.md").read_text()


def test_readme_opens_with_the_two_commands_ci_runs():
    block = re.search(r"```bash\n(.*?)```", README, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert commands[0].endswith("streammetrics demo") and '".[demo]"' in commands[0]
    assert "pytest" in commands[1] and '".[test]"' in commands[1]
    assert "awk" in (Path(__file__).resolve().parents[1] / ".ci" / "run").read_text()


def test_readme_library_examples_run():
    blocks = re.findall(r"```python\n(.*?)```", README, re.S)
    namespace: dict = {}
    # the library tour, the monitor example and the label-free example (the others need a model,
    # a file or Spark)
    runnable = blocks[:2] + [b for b in blocks if "Reference.from_arrays" in b]
    assert len(runnable) == 3
    for code in runnable:
        exec(compile(code, "README.md", "exec"), namespace)
    assert namespace["m"]["ece"] is None and 0 < namespace["m"]["drift_ks"] <= 1
