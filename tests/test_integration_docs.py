"""docs/integration.md's Python blocks run as written, in order, in one namespace."""

from __future__ import annotations

import json
import re
from pathlib import Path

DOC = Path(__file__).resolve().parents[1] / "docs" / "integration.md"


def test_every_python_block_runs(capsys) -> None:
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert len(blocks) >= 5
    namespace: dict = {"__name__": "integration_doc"}
    for block in blocks:
        exec(compile(block, str(DOC), "exec"), namespace)  # noqa: S102 - the doc's own examples
    out = capsys.readouterr().out
    assert "memory/2026-03-04.md" in out  # the first search found the ledger note
    assert "path required" in out  # the refused read printed its error shape


def test_json_blocks_parse() -> None:
    for block in re.findall(r"```json\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S):
        json.loads(block)
