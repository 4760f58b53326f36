"""Write docs/reference/cli.md from the command line's own ``--help`` texts.

Run ``python docs/generate_cli.py`` after changing a flag; ``tests/docs/test_docs.py`` fails while
the page differs from what this prints.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parent / "reference" / "cli.md"


def render() -> str:
    os.environ["COLUMNS"] = "100"  # argparse wraps at the terminal's width: fix it
    from streammetrics.cli import build_parser

    parser = build_parser()
    parser.prog = "streammetrics"
    out = ["# Command line reference", "",
           "Generated from `--help` by `python docs/generate_cli.py`; a test keeps it current.", "",
           "```text", parser.format_help().rstrip(), "```", ""]
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        sub.prog = f"streammetrics {name}"
        out += [f"## `streammetrics {name}`", "", "```text", sub.format_help().rstrip(), "```", ""]
    return "\n".join(out)


if __name__ == "__main__":
    PAGE.write_text(render())
    sys.stdout.write(f"wrote {PAGE}\n")
