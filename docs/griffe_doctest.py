"""A Griffe extension for the API reference: docstring examples (``>>>`` lines and the output
after them) become fenced ``pycon`` blocks, so Markdown shows them as code instead of reading
``s["a"]["b"]`` as a link. The docstrings themselves stay plain doctests (the suite runs them)."""
from __future__ import annotations

from typing import Any

import griffe


def fence(text: str) -> str:
    out: list[str] = []
    block = False
    for line in text.splitlines():
        starts = line.lstrip().startswith((">>> ", ">>>\t")) or line.strip() == ">>>"
        if starts and not block:
            out.append("```pycon")
            block = True
        elif block and not line.strip():
            out.append("```")
            block = False
        out.append(line)
    if block:
        out.append("```")
    return "\n".join(out)


class DoctestFences(griffe.Extension):
    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = fence(obj.docstring.value)
